import { Injectable } from '@nestjs/common';
import { RedisService } from './redis.module';

/** One limit to take a request from: at most `limit` per `periodMs`, counted under `key`. */
export interface RateLimit {
  key: string;
  limit: number;
  periodMs: number;
}

export interface RateDecision {
  allowed: boolean;
  /** Refused: when the first of the refusing limits admits a request again. */
  retryAfterMs: number;
  /** Per limit given: requests left now, and ms until it is fully replenished. */
  remaining: number[];
  resetMs: number[];
}

/**
 * GCRA (the generic cell rate algorithm) for every limit at once, in one script: a request is
 * admitted only if every limit admits it, and then counted in all of them. Each limit allows a
 * burst of `limit` requests, refilled evenly over the period. The time is Redis's own, so
 * replicas with skewed clocks count the same; the stored state is one number per limit.
 */
const GCRA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tats = {}
local retry = 0
for i = 1, #KEYS do
  local interval = tonumber(ARGV[(i - 1) * 2 + 1])
  local tolerance = tonumber(ARGV[(i - 1) * 2 + 2])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  if now < tat - tolerance then retry = math.max(retry, tat - tolerance - now) end
  tats[i] = tat
end
local out = { now }
if retry > 0 then
  out[2] = -retry
  for i = 1, #KEYS do out[#out + 1] = tats[i] end
  return out
end
out[2] = 0
for i = 1, #KEYS do
  local interval = tonumber(ARGV[(i - 1) * 2 + 1])
  local nextTat = tats[i] + interval
  redis.call('SET', KEYS[i], nextTat, 'PX', math.ceil(nextTat - now) + 1000)
  out[#out + 1] = nextTat
end
return out`;

@Injectable()
export class RateLimiter {
  constructor(private readonly redis: RedisService) {}

  async take(limits: RateLimit[]): Promise<RateDecision> {
    const args = limits.flatMap((l) => {
      const interval = l.periodMs / l.limit;
      return [String(interval), String(l.periodMs - interval)];
    });
    const client = this.redis.client as unknown as { atelierGcra?: (...a: (string | number)[]) => Promise<number[]> };
    if (!client.atelierGcra) this.redis.client.defineCommand('atelierGcra', { lua: GCRA });
    const [now, refused, ...tats] = (await client.atelierGcra!(limits.length, ...limits.map((l) => this.redis.names.key('rate', l.key)), ...args)).map(Number);
    return {
      allowed: refused === 0,
      retryAfterMs: refused < 0 ? -refused : 0,
      remaining: limits.map((l, i) => Math.max(0, Math.floor((now + l.periodMs - tats[i]) / (l.periodMs / l.limit)))),
      resetMs: limits.map((_, i) => Math.max(0, tats[i] - now)),
    };
  }
}
