import { Injectable } from '@nestjs/common';
import { RedisService } from './redis.module';
import { loadLuaScript, luaCommand, RUNTIME_LUA, type LuaScript } from './lua-script';

/** At most `limit` pieces of work at once, counted under `key`. */
export interface ConcurrencyLimit {
  key: string;
  limit: number;
}

export interface ConcurrencyDecision {
  allowed: boolean;
  /** Refused: which limit (index into the limits given) was full, and how many it held. */
  refusedBy?: number;
  held?: number;
}

/**
 * Takes slots for `members` in every set at once, or in none: each set is a sorted set of the
 * work it holds, scored by when that work's lease runs out (a process that died without giving
 * its slot back frees it then). Each member also gets a key naming its sets, so whoever ends
 * the work (another process: a queue-worker finishing a generation) releases it by name alone.
 * The time is Redis's own, so replicas with skewed clocks count the same. Keys and arguments: the
 * scripts' headers.
 */
const ACQUIRE = loadLuaScript(RUNTIME_LUA, 'concurrency-acquire.lua');
const RELEASE = loadLuaScript(RUNTIME_LUA, 'concurrency-release.lua');
const TAKE_ONE = loadLuaScript(RUNTIME_LUA, 'concurrency-take-1.lua');

/**
 * Counts work in flight against `max_concurrent` limits across every replica: a synchronous
 * request holds its slot until it ends, a queued generation until it reaches a final state. A slot
 * whose release was lost (a crash, Redis away at that moment) expires with its lease; slots of
 * generations are checked against their real state (`setActiveCheck`) before a refusal stands,
 * so a lost release never keeps a key blocked for the length of a generation's lease.
 */
@Injectable()
export class ConcurrencyLimiter {
  private activeCheck?: { prefix: string; active: (members: string[]) => Promise<Set<string>> };

  constructor(private readonly redis: RedisService) {}

  /** Members starting with `prefix` are only held while `active` says so (the queue registers generations). */
  setActiveCheck(prefix: string, active: (members: string[]) => Promise<Set<string>>): void {
    this.activeCheck = { prefix, active };
  }

  async acquire(limits: ConcurrencyLimit[], members: string[], leaseMs: number): Promise<ConcurrencyDecision> {
    if (limits.length === 0 || members.length === 0) return { allowed: true };
    let decision = await this.tryAcquire(limits, members, leaseMs);
    if (!decision.allowed && (await this.freeEnded(limits[decision.refusedBy!]))) decision = await this.tryAcquire(limits, members, leaseMs);
    return decision;
  }

  async release(members: string[]): Promise<void> {
    if (members.length === 0) return;
    if (this.redis.clustered) return this.releaseSpread(members);
    await this.script(RELEASE)(members.length, ...members.map((m) => this.ownerKey(m)), ...members);
  }

  /** How many slots a limit holds now (for tests and the operator's eyes). */
  async held(limit: ConcurrencyLimit): Promise<number> {
    const set = this.setKey(limit);
    await this.redis.client.zremrangebyscore(set, '-inf', Date.now());
    return this.redis.client.zcard(set);
  }

  private async tryAcquire(limits: ConcurrencyLimit[], members: string[], leaseMs: number): Promise<ConcurrencyDecision> {
    if (this.redis.clustered) return this.acquireSpread(limits, members, leaseMs);
    const [refused, held] = await this.script(ACQUIRE)(
      limits.length + members.length,
      ...limits.map((l) => this.setKey(l)),
      ...members.map((m) => this.ownerKey(m)),
      limits.length,
      ...limits.map((l) => l.limit),
      Math.max(1, Math.round(leaseMs)),
      ...members,
    );
    return refused === 0 ? { allowed: true } : { allowed: false, refusedBy: refused - 1, held };
  }

  /**
   * In a Redis Cluster each set is its own hash tag (an API key's set is shared by the namespaces
   * its keys serve): each set is taken by its own script, all at once, and when one refuses the
   * others give their slots back. Then each member's owner key names its sets, as on one node. A
   * concurrent request may meanwhile find a set one slot fuller than it ends up, never emptier.
   */
  private async acquireSpread(limits: ConcurrencyLimit[], members: string[], leaseMs: number): Promise<ConcurrencyDecision> {
    const lease = Math.max(1, Math.round(leaseMs));
    const take = luaCommand<number[]>(this.redis.client, TAKE_ONE);
    const each = await Promise.all(limits.map((l) => take(this.setKey(l), l.limit, lease, ...members)));
    const refused = each.findIndex(([r]) => r !== 0);
    if (refused >= 0) {
      await Promise.all(limits.map((l, i) => (each[i][0] === 0 ? this.redis.client.zrem(this.setKey(l), ...members) : undefined))).catch(() => undefined);
      return { allowed: false, refusedBy: refused, held: Number(each[refused][1]) };
    }
    const sets = limits.map((l) => this.setKey(l)).join('\n');
    await Promise.all(members.map((m) => this.redis.client.set(this.ownerKey(m), sets, 'PX', lease)));
    return { allowed: true };
  }

  /** The cluster's release: each member's owner key names its sets, each on its own shard. */
  private async releaseSpread(members: string[]): Promise<void> {
    await Promise.all(
      members.map(async (m) => {
        const sets = await this.redis.client.get(this.ownerKey(m));
        if (!sets) return;
        await Promise.all(sets.split('\n').map((set) => this.redis.client.zrem(set, m)));
        await this.redis.client.del(this.ownerKey(m));
      }),
    );
  }

  /** Releases the full set's members whose work has ended without saying so; whether any were. */
  private async freeEnded(limit: ConcurrencyLimit): Promise<boolean> {
    const check = this.activeCheck;
    if (!check) return false;
    const members = (await this.redis.client.zrange(this.setKey(limit), 0, -1)).filter((m) => m.startsWith(check.prefix));
    if (members.length === 0) return false;
    const active = await check.active(members);
    const ended = members.filter((m) => !active.has(m));
    if (ended.length === 0) return false;
    await this.release(ended);
    // Members whose owner key already expired are removed from this set directly.
    await this.redis.client.zrem(this.setKey(limit), ...ended);
    return true;
  }

  private setKey(l: ConcurrencyLimit): string {
    return this.redis.names.key('concurrency', this.redis.names.tag(l.key));
  }

  private ownerKey(member: string): string {
    return this.redis.names.key('concurrency-owner', this.redis.names.tag(member));
  }

  private script(script: LuaScript): (...args: (string | number)[]) => Promise<number[]> {
    return luaCommand<number[]>(this.redis.client, script);
  }
}
