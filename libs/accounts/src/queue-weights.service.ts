import { Injectable } from '@nestjs/common';
import { QUEUE_POOLS, queueWeightsKey } from '@atelier/contracts';
import { NamespacesRepository } from '@atelier/auth';
import { RedisService } from '@atelier/runtime';

/** A field of the hash no namespace id can be: present since the hash was last restored. */
const RESTORED = '~restored';

/**
 * Each namespace's queue weight where the fair placement of queued generations reads it (a Redis
 * hash); the namespaces table holds the durable copy, which `restore` copies back (a Redis that
 * lost its data, a weight set while Redis was away).
 */
@Injectable()
export class QueueWeights {
  constructor(
    private readonly redis: RedisService,
    private readonly namespaces: NamespacesRepository,
  ) {}

  /** The hash, or in a Redis Cluster each pool's copy of it (queueWeightsKey). */
  private keys(): string[] {
    return [...new Set(QUEUE_POOLS.map((pool) => queueWeightsKey(this.redis.names, pool)))];
  }

  /** null or 1: the default, so the entry goes. */
  async set(namespaceId: string, weight: number | null): Promise<void> {
    await Promise.all(
      this.keys().map((key) => (weight === null || weight === 1 ? this.redis.client.hdel(key, namespaceId) : this.redis.client.hset(key, namespaceId, String(weight)))),
    );
  }

  /** Makes the hash (each copy) the table's weights again. */
  async restore(): Promise<void> {
    const rows = await this.namespaces.queueWeights();
    await Promise.all(
      this.keys().map((key) => {
        const pipeline = this.redis.client.multi().del(key).hset(key, RESTORED, '1');
        for (const r of rows) if (r.queueWeight !== 1) pipeline.hset(key, r.id, String(r.queueWeight));
        return pipeline.exec();
      }),
    );
  }

  /** Restores the hash only if Redis lost it (a copy's marker is gone), so a weight set since is not overwritten. */
  async restoreIfLost(): Promise<boolean> {
    const present = await Promise.all(this.keys().map((key) => this.redis.client.hexists(key, RESTORED)));
    if (present.every((p) => p === 1)) return false;
    await this.restore();
    return true;
  }
}
