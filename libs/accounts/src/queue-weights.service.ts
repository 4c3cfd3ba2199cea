import { Injectable } from '@nestjs/common';
import { QUEUE_WEIGHTS_KEY } from '@atelier/contracts';
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

  private key(): string {
    return this.redis.names.key(QUEUE_WEIGHTS_KEY);
  }

  /** null or 1: the default, so the entry goes. */
  async set(namespaceId: string, weight: number | null): Promise<void> {
    if (weight === null || weight === 1) await this.redis.client.hdel(this.key(), namespaceId);
    else await this.redis.client.hset(this.key(), namespaceId, String(weight));
  }

  /** Makes the hash the table's weights again. */
  async restore(): Promise<void> {
    const rows = await this.namespaces.queueWeights();
    const pipeline = this.redis.client.multi().del(this.key()).hset(this.key(), RESTORED, '1');
    for (const r of rows) if (r.queueWeight !== 1) pipeline.hset(this.key(), r.id, String(r.queueWeight));
    await pipeline.exec();
  }

  /** Restores the hash only if Redis lost it (its marker is gone), so a weight set since is not overwritten. */
  async restoreIfLost(): Promise<boolean> {
    if ((await this.redis.client.hexists(this.key(), RESTORED)) === 1) return false;
    await this.restore();
    return true;
  }
}
