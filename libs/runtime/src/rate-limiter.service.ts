import { Injectable } from '@nestjs/common';
import { RedisService } from './redis.module';
import { loadLuaScript, luaCommand, RUNTIME_LUA, type LuaScript } from './lua-script';

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
const TAKE = loadLuaScript(RUNTIME_LUA, 'rate-take.lua');
const CORRECT = loadLuaScript(RUNTIME_LUA, 'rate-correct.lua');

@Injectable()
export class RateLimiter {
  constructor(private readonly redis: RedisService) {}

  async take(limits: RateLimit[]): Promise<RateDecision> {
    const args = limits.flatMap((l) => [String(l.periodMs / l.limit), String(l.periodMs), String(l.cost ?? 1)]);
    const [now, refused, ...tats] = (await this.script(TAKE)(limits.length, ...limits.map((l) => this.key(l)), ...args)).map(Number);
    return {
      allowed: refused === 0,
      retryAfterMs: refused < 0 ? -refused : 0,
      remaining: limits.map((l, i) => Math.max(0, Math.floor((now + l.periodMs - tats[i]) / (l.periodMs / l.limit)))),
      resetMs: limits.map((_, i) => Math.max(0, tats[i] - now)),
    };
  }

  /** Corrects what a request was counted for by `delta` units per limit (negative: gives back). */
  async correct(limits: RateLimit[], deltas: number[]): Promise<void> {
    await this.script(CORRECT)(limits.length, ...limits.map((l) => this.key(l)), ...limits.map((l, i) => String((deltas[i] * l.periodMs) / l.limit)));
  }

  private key(l: RateLimit): string {
    return this.redis.names.key('rate', l.key);
  }

  private script(script: LuaScript): (...args: (string | number)[]) => Promise<number[]> {
    return luaCommand<number[]>(this.redis.client, script);
  }
}
