import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { IMAGE_GENERATION_QUEUE, VIDEO_GENERATION_QUEUE } from '@atelier/contracts';
import { QueuePositions } from './queue-positions';

type Pool = 'image' | 'video';

/**
 * QUEUE_NAMESPACE_MAX_SHARE, kept by each worker over its own slots: one namespace holds at most
 * that share of them while another namespace's generations wait (one this worker could run:
 * under its share here; a Redis failure counts as someone waiting, the safe side). Summed over the workers it is
 * the same share of the pool, with no count shared across processes that a crash could leave
 * wrong. A generation over the share goes back to wait in its place (ctx.defer); with nobody else
 * waiting, a burst takes every idle slot.
 */
@Injectable()
export class NamespaceShare {
  private readonly running = { image: new Map<string, number>(), video: new Map<string, number>() };
  private readonly caps: Record<Pool, number>;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly positions: QueuePositions,
  ) {
    const cap = (slots: number) => Math.max(1, Math.floor((slots * config.QUEUE_NAMESPACE_MAX_SHARE) / 100));
    this.caps = { image: cap(IMAGE_GENERATION_QUEUE.settings.concurrency), video: cap(VIDEO_GENERATION_QUEUE.settings.concurrency) };
  }

  /**
   * Takes a slot for the namespace, or returns false (taking nothing) when it already holds its
   * share and others wait. Counted first, checked after: two jobs of one namespace starting at
   * once cannot both slip under the cap.
   */
  async enter(pool: Pool, namespaceId: string): Promise<boolean> {
    const running = this.running[pool];
    const holding = (running.get(namespaceId) ?? 0) + 1;
    running.set(namespaceId, holding);
    if (holding <= this.caps[pool]) return true;
    // Over the share only while no other namespace waits that this worker would run now: one
    // under its share here. (Two namespaces both over it would otherwise leave slots idle.)
    const waiting = await this.positions.waitingNamespaces(pool).catch(() => undefined);
    const othersWait = waiting === undefined || waiting.some((ns) => ns !== namespaceId && (running.get(ns) ?? 0) < this.caps[pool]);
    if (!othersWait) return true;
    this.leave(pool, namespaceId);
    return false;
  }

  leave(pool: Pool, namespaceId: string): void {
    const running = this.running[pool];
    const holding = (running.get(namespaceId) ?? 1) - 1;
    if (holding > 0) running.set(namespaceId, holding);
    else running.delete(namespaceId);
  }
}
