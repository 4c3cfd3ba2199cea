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
    const args = (l: RateLimit) => [String(l.periodMs / l.limit), String(l.periodMs), String(l.cost ?? 1)];
    let now: number, refused: number, tats: number[];
    if (this.redis.clustered && limits.length > 1) [now, refused, tats] = await this.takeSpread(limits, args);
    else {
      let rest: number[];
      [now, refused, ...rest] = (await this.script(TAKE)(limits.length, ...limits.map((l) => this.key(l)), ...limits.flatMap(args))).map(Number);
      tats = rest;
    }
    return {
      allowed: refused === 0,
      retryAfterMs: refused < 0 ? -refused : 0,
      remaining: limits.map((l, i) => Math.max(0, Math.floor((now + l.periodMs - tats[i]) / (l.periodMs / l.limit)))),
      resetMs: limits.map((_, i) => Math.max(0, tats[i] - now)),
    };
  }

  /**
   * In a Redis Cluster each limit is its own hash tag (an API key's limit is shared by every
   * namespace its keys serve, so no one tag fits all of a request's limits): each is taken by
   * the same script alone, all at once, and when one refuses, those that admitted are given their
   * units back. Between the two a concurrent request may see a limit one request fuller than it
   * ends up; it never sees one emptier, so no limit is ever exceeded.
   */
  private async takeSpread(limits: RateLimit[], args: (l: RateLimit) => string[]): Promise<[number, number, number[]]> {
    const each = (await Promise.all(limits.map((l) => this.script(TAKE)(1, this.key(l), ...args(l))))).map((r) => r.map(Number));
    const refusals = each.filter((r) => r[1] < 0);
    if (refusals.length === 0) return [each[0][0], 0, each.map((r) => r[2])];
    const taken = limits.filter((_, i) => each[i][1] === 0);
    await this.correct(
      taken,
      taken.map((l) => -(l.cost ?? 1)),
    ).catch(() => undefined);
    return [each[0][0], Math.min(...refusals.map((r) => r[1])), each.map((r, i) => (r[1] === 0 ? r[2] - (limits[i].cost ?? 1) * (limits[i].periodMs / limits[i].limit) : r[2]))];
  }

  /** Corrects what a request was counted for by `delta` units per limit (negative: gives back). */
  async correct(limits: RateLimit[], deltas: number[]): Promise<void> {
    if (limits.length === 0) return;
    const delta = (l: RateLimit, i: number) => String((deltas[i] * l.periodMs) / l.limit);
    if (this.redis.clustered && limits.length > 1) await Promise.all(limits.map((l, i) => this.script(CORRECT)(1, this.key(l), delta(l, i))));
    else await this.script(CORRECT)(limits.length, ...limits.map((l) => this.key(l)), ...limits.map(delta));
  }

  private key(l: RateLimit): string {
    return this.redis.names.key('rate', this.redis.names.tag(l.key));
  }

  private script(script: LuaScript): (...args: (string | number)[]) => Promise<number[]> {
    return luaCommand<number[]>(this.redis.client, script);
  }
}
