import { Injectable } from '@nestjs/common';
import { RedisService } from './redis.module';
import { redisScript } from './redis-connection';

/** One limit to take a request from: at most `limit` units per `periodMs`, counted under `key`. */
export interface RateLimit {
  key: string;
  limit: number;
  periodMs: number;
  /** Units this request counts for (1 request; or its estimated tokens). Default 1. */
  cost?: number;
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
  local interval = tonumber(ARGV[(i - 1) * 3 + 1])
  local period = tonumber(ARGV[(i - 1) * 3 + 2])
  local cost = tonumber(ARGV[(i - 1) * 3 + 3])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  local over = tat + cost * interval - period - now
  if over > 0 then retry = math.max(retry, over) end
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
  local interval = tonumber(ARGV[(i - 1) * 3 + 1])
  local cost = tonumber(ARGV[(i - 1) * 3 + 3])
  local nextTat = tats[i] + cost * interval
  redis.call('SET', KEYS[i], nextTat, 'PX', math.ceil(nextTat - now) + 1000)
  out[#out + 1] = nextTat
end
return out`;

/** Gives back (or takes more of) what a request was counted for, once its real cost is known. */
const CORRECT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #KEYS do
  local tat = tonumber(redis.call('GET', KEYS[i]) or now) + tonumber(ARGV[i])
  if tat > now then redis.call('SET', KEYS[i], tat, 'PX', math.ceil(tat - now) + 1000) else redis.call('DEL', KEYS[i]) end
end
return 1`;

@Injectable()
export class RateLimiter {
  constructor(private readonly redis: RedisService) {}

  async take(limits: RateLimit[]): Promise<RateDecision> {
    const args = limits.flatMap((l) => [String(l.periodMs / l.limit), String(l.periodMs), String(l.cost ?? 1)]);
    const [now, refused, ...tats] = (await this.script('atelierGcra', GCRA)(limits.length, ...limits.map((l) => this.key(l)), ...args)).map(Number);
    return {
      allowed: refused === 0,
      retryAfterMs: refused < 0 ? -refused : 0,
      remaining: limits.map((l, i) => Math.max(0, Math.floor((now + l.periodMs - tats[i]) / (l.periodMs / l.limit)))),
      resetMs: limits.map((_, i) => Math.max(0, tats[i] - now)),
    };
  }

  /** Corrects what a request was counted for by `delta` units per limit (negative: gives back). */
  async correct(limits: RateLimit[], deltas: number[]): Promise<void> {
    await this.script('atelierRateCorrect', CORRECT)(limits.length, ...limits.map((l) => this.key(l)), ...limits.map((l, i) => String((deltas[i] * l.periodMs) / l.limit)));
  }

  private key(l: RateLimit): string {
    return this.redis.names.key('rate', l.key);
  }

  private script(name: string, lua: string): (...args: (string | number)[]) => Promise<number[]> {
    return redisScript<number[]>(this.redis.client, name, lua);
  }
}
