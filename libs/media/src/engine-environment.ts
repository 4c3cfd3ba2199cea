import { Logger } from '@nestjs/common';
import { secretFromEnv, type AppConfig } from '@atelier/config';
import { fetchMedia } from '@atelier/safe-fetch';
import type { EngineEnvironment } from './engine';
import { bundledFfmpegPath } from './local/ffmpeg';

/** The engines' surroundings from the validated config: guarded fetches, latency, ffmpeg, secrets. */
export function engineEnvironment(config: AppConfig, overrides: Partial<EngineEnvironment> = {}): EngineEnvironment {
  const logger = new Logger('MediaEngines');
  let ffmpegPath = config.FFMPEG_PATH;
  return {
    fetchInput: (url, opts) =>
      fetchMedia(url, {
        ...opts,
        maxBytes: config.MEDIA_FETCH_MAX_BYTES,
        timeoutMs: config.MEDIA_FETCH_TIMEOUT_MS,
        allowedHosts: config.MEDIA_FETCH_ALLOWED_HOSTS,
      }),
    localLatencyMs: config.LOCAL_ENGINE_LATENCY_MS,
    get ffmpegPath() {
      ffmpegPath ??= bundledFfmpegPath();
      return ffmpegPath;
    },
    secret: secretFromEnv,
    pollIntervalMs: 500,
    maxPollIntervalMs: 5_000,
    logger: { log: (m) => logger.log(m), warn: (m) => logger.warn(m) },
    ...overrides,
  };
}
