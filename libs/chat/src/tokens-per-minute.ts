import { callerRateLimits, takeRateLimits, type Caller, type NamedRateLimit } from '@atelier/auth';
import { ApiError } from '@atelier/contracts';
import type { Metrics } from '@atelier/observability';
import type { RateLimit, RateLimiter } from '@atelier/runtime';

/**
 * Counts a request against the caller's tokens per minute (its key's, its namespace's, the keys that
 * made its key) for the tokens it may use, saying where it stands in OpenAI's x-ratelimit-*-tokens
 * headers. A request bigger than a whole minute's limit is 429 at once, in the words of
 * `tooBig(limit)`; one over the limit's remainder, 429 with retry-after. Keys without token limits
 * cost nothing here. Corrected to what it used with correctTokens once it settles.
 */
export function takeTokens(
  limiter: RateLimiter,
  metrics: Metrics,
  caller: Caller,
  tokens: number,
  header: (name: string, value: string) => void,
  tooBig: (limit: NamedRateLimit) => string,
): Promise<RateLimit[]> {
  const limits = callerRateLimits(caller, 'tokens', tokens);
  const over = limits.find((l) => tokens > l.limit);
  if (over) throw new ApiError('rate_limited', tooBig(over));
  if (limits.length === 0) return Promise.resolve([]);
  return metrics.timed('rate_limit.tokens', () => takeRateLimits(limiter, limits, 'tokens', header));
}

/** The tokens a request was counted for become the tokens it used (0: all given back). Never waited for, never throws. */
export function correctTokens(limiter: RateLimiter, taken: RateLimit[], used: number): void {
  if (taken.length === 0) return;
  void limiter.correct(taken, taken.map((l) => used - (l.cost ?? 0))).catch(() => undefined);
}
