import { fetchMedia } from '@atelier/safe-fetch';
import type { EngineEnvironment } from './engine';
import { bundledFfmpegPath } from './local/ffmpeg';

/**
 * An engine environment for tests and tools: real guarded fetches (loopback allowed, so fake
 * servers on 127.0.0.1 work), the bundled ffmpeg, fast polling, log lines collected.
 */
export function testEngineEnvironment(overrides: Partial<EngineEnvironment> = {}): EngineEnvironment & { logs: string[] } {
  const logs: string[] = [];
  return {
    fetchInput: (url, opts) => fetchMedia(url, { ...opts, allowedHosts: ['127.0.0.1', 'localhost'], timeoutMs: 10_000 }),
    localLatencyMs: 0,
    ffmpegPath: bundledFfmpegPath(),
    secret: () => undefined,
    pollIntervalMs: 10,
    maxPollIntervalMs: 50,
    logger: { log: (m) => logs.push(m), warn: (m) => logs.push(`WARN ${m}`) },
    logs,
    ...overrides,
  };
}
