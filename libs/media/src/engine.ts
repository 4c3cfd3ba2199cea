import type { ImageStyle } from '@atelier/contracts';
import type { MediaModelDefinition } from '@atelier/models';
import type { FetchedMedia } from '@atelier/safe-fetch';

/** A request an engine runs: already validated against the model's json_request_schema (defaults filled). */
export interface EngineRequest {
  model: MediaModelDefinition;
  params: Readonly<Record<string, unknown>>;
  /** Aborted when the caller goes away or the job is cancelled; engines stop their work (kill ffmpeg, abort HTTP). */
  signal: AbortSignal;
  /** Engines that can tell report how far along they are (0-1: sampling steps, encoded frames, the provider's figure). */
  onProgress?: (fraction: number) => void;
  /** A deployed atelier/local-image fine-tune's learned style (local-image paints with it). */
  style?: ImageStyle;
}

export interface EngineOutput {
  data: Buffer;
  contentType: string;
  /** File extension without the dot (`png`, `jpg`, `webp`, `mp4`). */
  extension: string;
  width?: number;
  height?: number;
  /** Videos: length of the output, the billed quantity. */
  durationSeconds?: number;
}

export interface EngineResult {
  outputs: EngineOutput[];
  /** The seed actually used (a random one when the request gave none), reported back to the caller. */
  seed?: number;
}

/** The one interface of every engine, built-in or remote: validated request + signal in, files out. */
export interface MediaEngine {
  run(request: EngineRequest): Promise<EngineResult>;
}

export interface InputFetchOptions {
  /** Acceptable types, e.g. `['image/*']`. */
  accept: readonly string[];
  /** Names the parameter in error messages (`input_image[1]`). */
  label: string;
  signal: AbortSignal;
}

export interface EngineLogger {
  log(message: string): void;
  warn(message: string): void;
}

/** What engines need from their surroundings; built from AppConfig by engineEnvironment(). */
export interface EngineEnvironment {
  /** SSRF-guarded download of input media (URLs and data URIs). */
  fetchInput(url: string, opts: InputFetchOptions): Promise<FetchedMedia>;
  /** Extra delay per built-in generation (LOCAL_ENGINE_LATENCY_MS). */
  localLatencyMs: number;
  ffmpegPath: string;
  /** Resolves `api_key_env` names of remote engines. */
  secret(name: string): string | undefined;
  /** First poll delay of prediction-style providers; grows with backoff up to maxPollIntervalMs. */
  pollIntervalMs: number;
  maxPollIntervalMs: number;
  logger: EngineLogger;
}
