import { ApiError } from '@atelier/contracts';
import type { RateDecision, RateLimit, RateLimiter } from '@atelier/runtime';
import type { Caller } from './caller';

/** Requests per minute (every request) or chat tokens per minute (a chat request's tokens). */
export type RateUnit = 'requests' | 'tokens';

/** A limit with the words that name it in a 429. */
export type NamedRateLimit = RateLimit & { name: string };

/** The caller's per-minute limits of one unit, its key's and its namespace's, each counting `cost`. */
export function callerRateLimits(caller: Caller, unit: RateUnit, cost = 1): NamedRateLimit[] {
  const [own, namespace, prefix] = unit === 'requests' ? [caller.rpm, caller.namespaceRpm, ''] : [caller.tpm, caller.namespaceTpm, 'tokens:'];
  const limits: NamedRateLimit[] = [];
  if (own !== undefined) limits.push({ key: `${prefix}key:${caller.keyPrefix}`, limit: own, periodMs: 60_000, cost, name: `API key ${caller.keyPrefix}` });
  if (namespace !== undefined) limits.push({ key: `${prefix}ns:${caller.namespaceId}`, limit: namespace, periodMs: 60_000, cost, name: `namespace ${caller.namespace}` });
  if (caller.makerLimits)
    for (const maker of caller.makerLimits) {
      const limit = unit === 'requests' ? maker.rpm : maker.tpm;
      if (limit !== undefined) limits.push({ key: `${prefix}key:${maker.keyPrefix}`, limit, periodMs: 60_000, cost, name: `API key ${maker.keyPrefix}, which made this key` });
    }
  return limits;
}

/**
 * Takes a request from `limits` across every replica (one Redis script) and says where it stands
 * in OpenAI's `x-ratelimit-{limit,remaining,reset}-<unit>` headers, so the SDK's own retry logic
 * works. Over a limit: 429 naming it, with retry-after. Returns the limits it was counted in
 * (none while Redis is away: limits are not enforced then, rather than refusing every request).
 */
export async function takeRateLimits(
  limiter: RateLimiter,
  limits: NamedRateLimit[],
  unit: RateUnit,
  header: (name: string, value: string) => void,
): Promise<NamedRateLimit[]> {
  if (limits.length === 0) return [];
  let decision: RateDecision;
  try {
    decision = await limiter.take(limits);
  } catch {
    return [];
  }
  // The binding limit: the one with the fewest left.
  const i = decision.remaining.indexOf(Math.min(...decision.remaining));
  header(`x-ratelimit-limit-${unit}`, String(limits[i].limit));
  header(`x-ratelimit-remaining-${unit}`, String(decision.allowed ? decision.remaining[i] : 0));
  header(`x-ratelimit-reset-${unit}`, `${Math.ceil(decision.resetMs[i] / 1000)}s`);
  if (decision.allowed) return limits;
  const seconds = Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
  header('retry-after', String(seconds));
  throw new ApiError('rate_limited', `Rate limit reached: ${limits[i].limit} ${unit} per minute for ${limits[i].name}; retry after ${seconds} s`);
}
