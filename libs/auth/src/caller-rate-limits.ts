import { ApiError } from '@atelier/contracts';
import type { RateDecision, RateLimit, RateLimiter } from '@atelier/runtime';
import type { Caller, MakerLimits } from './caller';

/** Requests per minute that create work (rpm), other requests per minute (read_rpm), or chat tokens per minute (a chat request's tokens). */
export type RateUnit = 'requests' | 'reads' | 'tokens';

const UNITS: Record<RateUnit, { own: (c: Caller) => number | undefined; namespace: (c: Caller) => number | undefined; maker: (m: MakerLimits) => number | undefined; key: string }> = {
  requests: { own: (c) => c.rpm, namespace: (c) => c.namespaceRpm, maker: (m) => m.rpm, key: '' },
  reads: { own: (c) => c.readRpm, namespace: (c) => c.namespaceReadRpm, maker: (m) => m.readRpm, key: 'reads:' },
  tokens: { own: (c) => c.tpm, namespace: (c) => c.namespaceTpm, maker: (m) => m.tpm, key: 'tokens:' },
};

/** A limit with the words that name it in a 429. */
export type NamedRateLimit = RateLimit & { name: string };

/** The caller's per-minute limits of one unit, its key's and its namespace's, each counting `cost`. */
export function callerRateLimits(caller: Caller, unit: RateUnit, cost = 1): NamedRateLimit[] {
  const rule = UNITS[unit];
  const [own, namespace, prefix] = [rule.own(caller), rule.namespace(caller), rule.key];
  const limits: NamedRateLimit[] = [];
  if (own !== undefined) limits.push({ key: `${prefix}key:${caller.keyPrefix}`, limit: own, periodMs: 60_000, cost, name: `API key ${caller.keyPrefix}` });
  if (namespace !== undefined) limits.push({ key: `${prefix}ns:${caller.namespaceId}`, limit: namespace, periodMs: 60_000, cost, name: `namespace ${caller.namespace}` });
  if (caller.makerLimits)
    for (const maker of caller.makerLimits) {
      const limit = rule.maker(maker);
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
  // The binding limit: the one with the fewest left. Both request classes answer in OpenAI's
  // -requests headers, each describing the class of the request it answers.
  const i = decision.remaining.indexOf(Math.min(...decision.remaining));
  const suffix = unit === 'tokens' ? 'tokens' : 'requests';
  header(`x-ratelimit-limit-${suffix}`, String(limits[i].limit));
  header(`x-ratelimit-remaining-${suffix}`, String(decision.allowed ? decision.remaining[i] : 0));
  header(`x-ratelimit-reset-${suffix}`, `${Math.ceil(decision.resetMs[i] / 1000)}s`);
  if (decision.allowed) return limits;
  const seconds = Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
  header('retry-after', String(seconds));
  const what = unit === 'reads' ? 'read requests (read_rpm)' : unit;
  throw new ApiError('rate_limited', `Rate limit reached: ${limits[i].limit} ${what} per minute for ${limits[i].name}; retry after ${seconds} s`);
}
