import { ApiError } from '@atelier/contracts';
import { retryAfterMs, retryDelayMs, statusFailureKind, type RetryPolicy } from '@atelier/runtime';
import { abortableSleep, GenerationCancelledError, upstreamError } from '../engine-errors';
import type { EngineEnvironment } from '../engine';

export const DEFAULT_UPSTREAM_TIMEOUT_MS = 15 * 60 * 1000;

export interface UpstreamRequest {
  method?: 'GET' | 'POST' | 'PUT';
  headers?: Record<string, string>;
  /** JSON-serialised unless it is FormData. */
  body?: unknown;
  signal: AbortSignal;
  /** Bound of this one HTTP exchange. */
  timeoutMs?: number;
  /** The engine's retry policy (the same as chat's); without one, the default policy. */
  retry?: RetryPolicy;
}

/** The provider's own error text, from the usual places (OpenAI, Replicate, fal). */
function errorText(body: unknown, raw: string): string {
  if (body && typeof body === 'object') {
    const b = body as Record<string, unknown>;
    const err = b.error;
    if (err && typeof err === 'object' && typeof (err as Record<string, unknown>).message === 'string') return (err as { message: string }).message;
    if (typeof err === 'string') return err;
    if (typeof b.detail === 'string') return b.detail;
    if (Array.isArray(b.detail)) return JSON.stringify(b.detail);
    if (typeof b.message === 'string') return b.message;
    if (typeof b.title === 'string') return b.title;
  }
  return raw.slice(0, 500) || 'no error message';
}

/** A failure worth another attempt: the provider's own words, and how long it asked to wait. */
class RetryableFailure extends Error {
  constructor(
    readonly error: ApiError,
    readonly retryAfter?: number,
  ) {
    super(error.message);
  }
}

/**
 * One JSON exchange with a model provider, retried by the shared policy (libs/runtime's
 * upstream-retry) after a 429, 408 or 5xx, a lost connection or an answer cut off; never after a
 * timeout (its bound is the whole exchange, often minutes) nor once the caller cancelled, which
 * is not the provider's failure.
 */
export async function upstreamJson<T>(provider: string, url: string, req: UpstreamRequest): Promise<T> {
  for (let n = 0; ; n++) {
    try {
      return await upstreamAttempt<T>(provider, url, req);
    } catch (err) {
      if (!(err instanceof RetryableFailure)) throw err;
      const delay = retryDelayMs(req.retry ?? {}, n, err.retryAfter);
      if (delay === undefined) throw err.error;
      await abortableSleep(delay, req.signal);
    }
  }
}

async function upstreamAttempt<T>(provider: string, url: string, req: UpstreamRequest): Promise<T> {
  const timeoutMs = req.timeoutMs ?? 60_000;
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = AbortSignal.any([req.signal, timeout]);
  /** Why the exchange broke off: the caller cancelled, its time ran out, or the provider failed (worth another attempt). */
  const brokenOff = (failure: string): Error => {
    if (req.signal.aborted) return new GenerationCancelledError();
    if (timeout.aborted) return new ApiError('timeout', `The model provider (${provider}) did not answer within ${timeoutMs} ms`);
    return new RetryableFailure(upstreamError(provider, failure));
  };
  const isForm = req.body instanceof FormData;
  let res: Response;
  try {
    res = await fetch(url, {
      method: req.method ?? (req.body === undefined ? 'GET' : 'POST'),
      headers: { accept: 'application/json', ...(req.body !== undefined && !isForm ? { 'content-type': 'application/json' } : {}), ...req.headers },
      body: req.body === undefined ? undefined : isForm ? (req.body as FormData) : JSON.stringify(req.body),
      signal,
    });
  } catch (err) {
    throw brokenOff(`could not reach ${new URL(url).origin}: ${(err as Error).cause ? String((err as { cause: Error }).cause.message) : (err as Error).message}`);
  }
  let raw: string;
  try {
    raw = await res.text();
  } catch {
    throw brokenOff('the answer was cut off');
  }
  let body: unknown;
  try {
    body = raw ? JSON.parse(raw) : {};
  } catch {
    body = undefined;
  }
  if (!res.ok) {
    const failure = upstreamError(provider, `HTTP ${res.status}: ${errorText(body, raw)}`, { status: res.status });
    throw statusFailureKind(res.status) === 'retry' ? new RetryableFailure(failure, retryAfterMs(res.headers.get('retry-after') ?? undefined)) : failure;
  }
  if (body === undefined || typeof body !== 'object' || body === null) throw upstreamError(provider, 'the answer is not a JSON object');
  return body as T;
}

/** Authorization header for a remote engine; a configured but unset secret makes the model unavailable (503). */
/** What every remote engine derives from its model's config before a call. */
export interface UpstreamTarget {
  /** host[:port], as errors and metrics name the provider. */
  provider: string;
  /** base_url without a trailing slash. */
  base: string;
  key: string | undefined;
  timeoutMs: number;
  retry: RetryPolicy;
}

export function upstreamTarget(
  env: EngineEnvironment,
  modelId: string,
  config: { base_url: string; api_key_env?: string; timeout_ms?: number; max_retries?: number; retry_backoff_ms?: number },
): UpstreamTarget {
  return {
    provider: new URL(config.base_url).host,
    base: config.base_url.replace(/\/$/, ''),
    key: apiKey(env, modelId, config.api_key_env),
    timeoutMs: config.timeout_ms ?? DEFAULT_UPSTREAM_TIMEOUT_MS,
    retry: { maxRetries: config.max_retries, backoffMs: config.retry_backoff_ms },
  };
}

export function apiKey(env: EngineEnvironment, modelId: string, envName: string | undefined): string | undefined {
  if (!envName) return undefined;
  const key = env.secret(envName);
  if (!key) throw new ApiError('service_unavailable', `Model ${modelId} is not available: its API key (environment variable ${envName}) is not set`);
  return key;
}

/** Every http(s)/data URL in a provider's output, wherever it sits (string, array, {url}, {images:[{url}]}, ...). */
export function collectUrls(output: unknown, found: string[] = []): string[] {
  if (typeof output === 'string') {
    if (/^(https?:\/\/|data:)/.test(output)) found.push(output);
  } else if (Array.isArray(output)) {
    for (const item of output) collectUrls(item, found);
  } else if (output && typeof output === 'object') {
    const o = output as Record<string, unknown>;
    // Known media keys first, in their natural order, so e.g. fal's `images` win over a `thumbnail`.
    const keys = ['url', 'images', 'image', 'videos', 'video', 'output', ...Object.keys(o)];
    for (const key of new Set(keys)) if (key in o && key !== 'thumbnail' && key !== 'logs') collectUrls(o[key], found);
  }
  return [...new Set(found)];
}
