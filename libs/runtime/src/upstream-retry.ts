/**
 * The one retry policy for calls to model providers, chat's and media's alike: which failures are
 * worth another attempt, how long to wait before it, and when to stop waiting for this server.
 */

/** Retries of one server before giving up on it (a catalog engine's `max_retries`). */
export const DEFAULT_MAX_RETRIES = 2;
/** First retry delay, doubled each time (a catalog engine's `retry_backoff_ms`). */
export const DEFAULT_RETRY_BACKOFF_MS = 200;
/** A Retry-After longer than this gives up on the server (or moves to the next) rather than holding the request. */
export const MAX_RETRY_AFTER_MS = 5_000;

/**
 * What a failed attempt means: `retry` the same server after a backoff (429, 408, 5xx, timeouts,
 * connection errors), move to the `next` server (this one is misconfigured: 401, 403, 404), or stop
 * (`fatal`: the request itself is wrong).
 */
export type UpstreamFailureKind = 'retry' | 'next' | 'fatal';

export function statusFailureKind(status: number): UpstreamFailureKind {
  if (status === 429 || status === 408 || status >= 500) return 'retry';
  if (status === 401 || status === 403 || status === 404) return 'next';
  return 'fatal';
}

/** A Retry-After header (seconds, or an HTTP date) in ms; undefined when absent or unreadable. */
export function retryAfterMs(raw: string | undefined): number | undefined {
  if (!raw) return undefined;
  const seconds = Number(raw);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

export interface RetryPolicy {
  maxRetries?: number;
  backoffMs?: number;
}

/**
 * How long to wait before retry `n + 1` (n counts from 0) after a retryable failure: the backoff
 * doubled per retry, or the server's Retry-After when longer; undefined when no retry is left, or
 * the server asks for longer than MAX_RETRY_AFTER_MS.
 */
export function retryDelayMs(policy: RetryPolicy, n: number, retryAfter?: number): number | undefined {
  if (n >= (policy.maxRetries ?? DEFAULT_MAX_RETRIES)) return undefined;
  const delay = Math.max((policy.backoffMs ?? DEFAULT_RETRY_BACKOFF_MS) * 2 ** n, retryAfter ?? 0);
  return delay > MAX_RETRY_AFTER_MS ? undefined : delay;
}
