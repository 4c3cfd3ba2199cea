import { Injectable } from '@nestjs/common';
import { GENERATION_PRIORITIES, queueWeightsKey, type QueuePool } from '@atelier/contracts';
import { loadLuaScript, luaCommand, luaDirectory, RedisService } from '@atelier/runtime';

/** A pool of the fair order: the generation queues, and batch lines (libs/batch). */
type Pool = QueuePool;

export const QUEUE_PRIORITIES = GENERATION_PRIORITIES;
export type QueuePriority = (typeof QUEUE_PRIORITIES)[number];

const LUA = luaDirectory(__dirname, 'libs/queue/src');
/**
 * Start-time fair queuing across namespaces, per pool (docs/api.md, "Fair scheduling"): each
 * namespace has a finish tag F; the pool has a virtual time V, the tag of the latest generation a
 * worker started. A new generation of namespace n gets tag max(V, F_n) + 1/weight_n, and F_n
 * becomes that tag. Generations run in tag order (BullMQ priority = ceil(tag)), so a namespace
 * with nothing waiting goes right after the round in progress, however long another's backlog is,
 * and backlogged namespaces share the workers in proportion to their weights.
 *
 * Priority orders a namespace's own generations and nothing else: the tags a namespace holds are
 * its places in the fair order, and they go to its generations by (priority, arrival), so it never
 * gets ahead of another. The scripts' headers name their keys and arguments.
 */
const PLACE = loadLuaScript(LUA, 'queue-place-5.lua');
const STARTED = loadLuaScript(LUA, 'queue-started-4.lua');
const REMOVE = loadLuaScript(LUA, 'queue-remove-5.lua');

/**
 * Where each queued generation stands in its pool, in the fair order: a Redis sorted set per
 * pool (member the generation id, score its place), kept beside BullMQ's prioritized set, which
 * runs jobs in the same order. A generation leaves it when it starts, ends or is cancelled.
 * Reading a position is one ZRANK (O(log n)), not a count over the queue.
 */
@Injectable()
export class QueuePositions {
  constructor(private readonly redis: RedisService) {}

  // A pool's keys share its hash tag in a Redis Cluster: its scripts touch them together.
  private key(pool: Pool): string {
    return this.redis.names.key('queue-positions', this.redis.names.tag(pool));
  }

  private fairKey(pool: Pool): string {
    return this.redis.names.key('queue-fair', this.redis.names.tag(pool));
  }

  /** The namespaces with generations waiting in the pool. */
  private waitingKey(pool: Pool): string {
    return this.redis.names.key('queue-waiting', this.redis.names.tag(pool));
  }

  private lineKey(pool: Pool, namespaceId = ''): string {
    return this.redis.names.key('queue-line', this.redis.names.tag(pool), namespaceId);
  }

  private weightsKey(pool: Pool): string {
    return queueWeightsKey(this.redis.names, pool);
  }

  /**
   * Places dispatched generations in the fair order, in the order given: the BullMQ priority of
   * each, and the waiting generations of their namespaces that moved one place on (their BullMQ
   * priorities must follow). One already placed keeps its place.
   */
  async add(
    pool: Pool,
    entries: { id: string; namespaceId: string; priority?: QueuePriority }[],
  ): Promise<{ priorities: number[]; moved: { id: string; priority: number }[] }> {
    if (entries.length === 0) return { priorities: [], moved: [] };
    const place = luaCommand<(number | string)[]>(this.redis.client, PLACE);
    const out = await place(
      this.key(pool),
      this.fairKey(pool),
      this.weightsKey(pool),
      this.lineKey(pool),
      this.waitingKey(pool),
      ...entries.flatMap((e) => [e.id, e.namespaceId, QUEUE_PRIORITIES.indexOf(e.priority ?? 'normal')]),
    );
    const moved: { id: string; priority: number }[] = [];
    for (let i = entries.length; i + 1 < out.length; i += 2) moved.push({ id: String(out[i]), priority: Number(out[i + 1]) });
    return { priorities: out.slice(0, entries.length).map(Number), moved };
  }

  /** A worker started the generation: it leaves the line, and the pool's virtual time moves to its place. */
  async started(pool: Pool, id: string, namespaceId: string): Promise<void> {
    const started = luaCommand<number>(this.redis.client, STARTED);
    await started(this.key(pool), this.fairKey(pool), this.lineKey(pool, namespaceId), this.waitingKey(pool), id, namespaceId);
  }

  /** The generation left the queue (ended, cancelled). */
  async remove(pool: Pool, id: string, namespaceId: string): Promise<void> {
    const remove = luaCommand<number>(this.redis.client, REMOVE);
    await remove(this.key(pool), this.fairKey(pool), this.lineKey(pool, namespaceId), this.waitingKey(pool), this.weightsKey(pool), id, namespaceId);
  }

  /** 0 = next to run; null when it is not waiting in the pool (or Redis does not know it). */
  async positions(entries: { id: string; pool: Pool }[]): Promise<Map<string, number | null>> {
    const out = new Map<string, number | null>();
    if (entries.length === 0) return out;
    if (entries.length === 1) {
      // A poll of one generation: the command alone, without a pipeline's own bookkeeping.
      const rank = await this.redis.client.zrank(this.key(entries[0].pool), entries[0].id);
      return out.set(entries[0].id, rank === null ? null : Number(rank));
    }
    if (this.redis.clustered) {
      // A cluster pipeline must stay on one node, and the pools' keys are spread over them.
      const ranks = await Promise.all(entries.map((e) => this.redis.client.zrank(this.key(e.pool), e.id).catch(() => null)));
      entries.forEach((e, i) => out.set(e.id, ranks[i] === null ? null : Number(ranks[i])));
      return out;
    }
    const pipeline = this.redis.client.pipeline();
    for (const e of entries) pipeline.zrank(this.key(e.pool), e.id);
    const results = (await pipeline.exec()) ?? [];
    entries.forEach((e, i) => {
      const [err, rank] = results[i] ?? [];
      out.set(e.id, err || rank === null || rank === undefined ? null : Number(rank));
    });
    return out;
  }

  /** The namespaces with generations waiting in the pool. */
  async waitingNamespaces(pool: Pool): Promise<string[]> {
    return this.redis.client.smembers(this.waitingKey(pool));
  }

  /** The first `count` ids of a pool, for the sweeper to drop any that are no longer queued. */
  async head(pool: Pool, count: number): Promise<string[]> {
    return this.redis.client.zrange(this.key(pool), 0, count - 1);
  }

  async removeMany(pool: Pool, entries: { id: string; namespaceId: string }[]): Promise<void> {
    for (const e of entries) await this.remove(pool, e.id, e.namespaceId);
  }
}
