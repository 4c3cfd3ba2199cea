import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { NAMESPACE_LIMITS_CHANGED_CHANNEL } from '@atelier/contracts';
import { BroadcastBus, RedisService } from '@atelier/runtime';

/** How long a change waits for every replica to acknowledge it; past it the auth cache's own expiry (AUTH_CACHE_MS) still bounds the delay. */
const ACK_TIMEOUT_MS = 1000;
const ACK_POLL_MS = 2;

/**
 * Makes a namespace's new limits apply to the very next request on every gateway replica: the
 * change is broadcast, each replica drops what it cached of the namespace's keys (the limits ride
 * on the cached caller) and acknowledges, and `announce` returns once as many acknowledgements
 * have arrived as Redis delivered the broadcast to. A pub/sub message alone reaches a replica
 * "soon"; a request sent a millisecond after the operator's PUT could still find the old limits.
 */
@Injectable()
export class LimitChanges {
  private readonly logger = new Logger(LimitChanges.name);

  constructor(
    private readonly bus: BroadcastBus,
    private readonly redis: RedisService,
  ) {}

  async announce(namespaceId: string): Promise<void> {
    const ackKey = this.redis.names.key('limit-change-acks', randomUUID());
    let reached: number;
    try {
      reached = await this.bus.publishCounted(NAMESPACE_LIMITS_CHANGED_CHANNEL, { namespaceId, ackKey });
    } catch (err) {
      // Redis away: the limits are in Postgres already, and every cached reading expires within AUTH_CACHE_MS.
      this.logger.warn(`Could not announce the new limits of namespace ${namespaceId}: ${(err as Error).message}`);
      return;
    }
    const deadline = Date.now() + ACK_TIMEOUT_MS;
    let acked = 0;
    while (acked < reached && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, ACK_POLL_MS));
      acked = await this.redis.client.llen(ackKey).catch(() => reached);
    }
    await this.redis.client.del(ackKey).catch(() => undefined);
    if (acked < reached) this.logger.warn(`${reached - acked} of ${reached} processes did not acknowledge namespace ${namespaceId}'s new limits within ${ACK_TIMEOUT_MS} ms`);
  }
}
