import { Injectable } from '@nestjs/common';
import { RedisService } from '@atelier/runtime';

type Pool = 'image' | 'video';

/**
 * Where each queued generation stands in its pool: a Redis sorted set per pool (member the
 * generation id, score its dispatch order), kept beside BullMQ's wait list, which runs
 * jobs in the same first-in first-out order. A generation leaves it when it starts, ends or is
 * cancelled. Reading a position is one ZRANK (O(log n)), not a count over the queue.
 */
@Injectable()
export class QueuePositions {
  constructor(private readonly redis: RedisService) {}

  private key(pool: Pool): string {
    return this.redis.names.key('queue-positions', pool);
  }

  /** Dispatch order within this process: ms x 4096 + a counter, exact in a double up to the year 2255. */
  private lastScore = 0;

  /** Adds dispatched generations in the order given; one re-added after a loss keeps its first place (NX). */
  async add(pool: Pool, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const args: string[] = [];
    for (const id of ids) {
      this.lastScore = Math.max(this.lastScore + 1, Date.now() * 4096);
      args.push(String(this.lastScore), id);
    }
    await this.redis.client.zadd(this.key(pool), 'NX', ...args);
  }

  /** The generation left the queue (started, ended, cancelled). */
  async remove(pool: Pool, id: string): Promise<void> {
    await this.redis.client.zrem(this.key(pool), id);
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
    const pipeline = this.redis.client.pipeline();
    for (const e of entries) pipeline.zrank(this.key(e.pool), e.id);
    const results = (await pipeline.exec()) ?? [];
    entries.forEach((e, i) => {
      const [err, rank] = results[i] ?? [];
      out.set(e.id, err || rank === null || rank === undefined ? null : Number(rank));
    });
    return out;
  }

  /** The first `count` ids of a pool, for the sweeper to drop any that are no longer queued. */
  async head(pool: Pool, count: number): Promise<string[]> {
    return this.redis.client.zrange(this.key(pool), 0, count - 1);
  }

  async removeMany(pool: Pool, ids: string[]): Promise<void> {
    if (ids.length > 0) await this.redis.client.zrem(this.key(pool), ...ids);
  }
}
