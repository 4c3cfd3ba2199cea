import { Injectable, Logger } from '@nestjs/common';
import { CreditLedger, PAID_REQUEST_KINDS, reservationReference, type DeliveredUsage, type StaleReservationRule } from '@atelier/billing';
import { GENERATION_COMPLETED_CHANNEL, type CallerContext, type GenerationCompletedEvent } from '@atelier/contracts';
import { NamespacesRepository } from '@atelier/auth';
import type { GenerationModel } from '@atelier/db';
import { requestContext } from '@atelier/observability';
import { BroadcastBus, ConcurrencyLimiter, UserEventLog } from '@atelier/runtime';
import { QueuePositions, type QueuePriority } from './queue-positions';
import { GenerationsRepository } from './generations.repository';
import { WebhookNotifier } from './webhook-notifier.service';

/**
 * The generation state machine as conditional updates: each transition names the state it
 * leaves, so a late or duplicate worker can never overwrite a terminal state (or a cancel).
 * A terminal transition, its credit step and its outbox event commit together.
 */
@Injectable()
export class GenerationState {
  private readonly logger = new Logger(GenerationState.name);

  constructor(
    private readonly generations: GenerationsRepository,
    private readonly namespaces: NamespacesRepository,
    private readonly ledger: CreditLedger,
    private readonly bus: BroadcastBus,
    private readonly events: UserEventLog,
    private readonly positions: QueuePositions,
    private readonly webhooks: WebhookNotifier,
    private readonly slots: ConcurrencyLimiter,
  ) {}

  /**
   * queued -> processing (sets started_at). A generation already processing is returned too:
   * that is BullMQ redelivering the job of a worker that died. Anything else: undefined.
   */
  async start(id: string): Promise<(GenerationModel & { firstStart: boolean }) | undefined> {
    const row = await this.generations.startProcessing(id);
    // Out of the waiting line; a failure here only leaves a stale entry the sweeper drops.
    if (row) {
      await this.positions.started(row.mediaType, id, row.namespaceId).catch(() => undefined);
      // Also for a redelivered job: the message id is the same, so the second add is a no-op.
      await this.webhooks.notify(id, 'processing', row.params);
    }
    return row;
  }

  async namespaceName(id: string): Promise<string | undefined> {
    return this.namespaces.name(id);
  }

  /** Of these ids, the generations no longer queued, with their namespaces (the sweeper drops them from the positions). */
  async notQueuedAmong(ids: string[]): Promise<{ id: string; namespaceId: string }[]> {
    if (ids.length === 0) return [];
    const rows = await this.generations.statuses(ids);
    const known = new Set(rows.map((r) => r.id));
    // An id without a row (deleted with its namespace) has no line left to leave.
    return [...rows.filter((r) => r.status !== 'queued'), ...ids.filter((id) => !known.has(id)).map((id) => ({ id, namespaceId: '' }))].map(({ id, namespaceId }) => ({ id, namespaceId }));
  }

  /** processing -> succeeded, charging `cost`; false if the generation was cancelled meanwhile. */
  async succeed(id: string, resultKeys: string[], cost: string, usage?: DeliveredUsage): Promise<boolean> {
    return this.finish(id, { status: 'succeeded', resultKeys, cost, usage });
  }

  /** processing (or queued) -> failed, releasing the credits; false if already terminal. */
  async fail(id: string, message: string): Promise<boolean> {
    return this.finish(id, { status: 'failed', message });
  }

  private async finish(
    id: string,
    outcome: { status: 'succeeded'; resultKeys: string[]; cost: string; usage?: DeliveredUsage } | { status: 'failed'; message: string },
  ): Promise<boolean> {
    const resultKeys = outcome.status === 'succeeded' ? outcome.resultKeys : [];
    const error = outcome.status === 'failed' ? outcome.message.slice(0, 2000) : null;
    const ended = await this.generations.finishActive(id, { status: outcome.status, resultKeys, error }, async (row, tx) => {
      let cost: string | undefined;
      if (outcome.status === 'succeeded') {
        cost = row.reservation_id ? (await this.ledger.settle(row.reservation_id, outcome.cost, tx, outcome.usage)).charged : '0';
      } else if (row.reservation_id) {
        await this.ledger.release(row.reservation_id, tx);
      }
      const event: GenerationCompletedEvent = {
        userId: row.owner_id,
        namespaceId: row.namespace_id,
        generation_id: id,
        status: outcome.status,
        model_name: row.model_name,
        media_type: row.media_type,
        result_key: resultKeys[0] ?? null,
        error_message: error,
        completed_at: Math.floor(row.completed_at.getTime() / 1000),
      };
      return { cost, event };
    });
    if (!ended) return false;
    const { event } = ended;
    // Its max_concurrent slot (PaidRequests.reserveMany) is free again.
    await this.slots.release([reservationReference('generation', id)]).catch(() => undefined);
    await this.positions.remove(event.media_type, id, event.namespaceId).catch(() => undefined);
    await this.publish(event, ended.row.params).catch((err: Error) =>
      this.logger.warn(`Event for ${id} not published yet (${err.message}); the outbox sweeper will`),
    );
    return true;
  }

  private async publish(event: GenerationCompletedEvent, params: unknown): Promise<void> {
    await this.broadcast(event, params);
    await this.generations.markEventPublished(event.generation_id);
  }

  /**
   * Publishes outbox events whose publisher died between commit and publish. Claims rows
   * with SKIP LOCKED so several sweepers never publish the same event.
   */
  async publishStranded(olderThanMs = 5_000, limit = 200): Promise<number> {
    return this.generations.publishStrandedEvents(olderThanMs, limit, async (row) => {
      // A cancel's row: its completed webhook only (the message id makes a repeat a no-op).
      if (!row.broadcast) await this.webhooks.queueMessage(row.generation_id, 'completed');
      else await this.broadcast(row.payload);
    });
  }

  /**
   * Retained first (its id becomes the SSE `id:`, and a stream resuming with Last-Event-ID is sent
   * it from there), then broadcast to the connected streams with that id. Published again (the
   * outbox sweeper), it keeps the id its first append got (UserEventLog.append).
   */
  private async broadcast(event: GenerationCompletedEvent, params?: unknown): Promise<void> {
    const { event_id: _previous, ...payload } = event;
    const eventId = await this.events.append(event.userId, payload, event.generation_id);
    await this.bus.publish(GENERATION_COMPLETED_CHANNEL, { ...payload, event_id: eventId });
    // The completed webhook goes with the outbox event: a crash before it is published leaves both
    // to the outbox sweeper (which does not know the params, so the notifier reads them), and the
    // message id makes a repeat a no-op.
    await this.webhooks.queueMessage(event.generation_id, 'completed', params);
  }

  /** Who a queued generation runs for: its owner's name and the billed namespace's, as a job caller. */
  async runFor(row: GenerationModel): Promise<CallerContext> {
    const names = await this.generations.namesOf(row.namespaceId, row.ownerId);
    if (!names) throw new Error(`generation ${row.id}: its namespace or owner no longer exists`);
    return { userId: row.ownerId, username: names.username, namespaceId: row.namespaceId, namespace: names.namespace, requestId: requestContext.current()?.requestId ?? row.id };
  }

  /** Processing generations started long ago: candidates for a lost worker (checked against BullMQ). */
  async longProcessing(olderThanMs: number, limit = 200): Promise<{ id: string; mediaType: 'image' | 'video' }[]> {
    return this.generations.longProcessing(olderThanMs, limit);
  }

  /**
   * Of these reservation ids, those a generation row refers to. Enqueue reserves first and
   * writes the rows after, so a crash in between leaves reservations nothing refers to: those
   * are the stale ones (generationReservationRule).
   */
  async reservationsInUse(ids: string[]): Promise<Set<string>> {
    return this.generations.reservationsInUse(ids);
  }

  /** Queued generations whose job never reached Redis (crash between commit and add). */
  async strandedQueued(olderThanMs = 10_000, limit = 500): Promise<{ id: string; mediaType: 'image' | 'video'; namespaceId: string; priority: QueuePriority }[]> {
    return this.generations.queuedBefore(olderThanMs, limit);
  }
}

/**
 * Generation reservations are owned by their generation row for as long as it lives (its
 * terminal transition settles or releases them), so only those no row refers to are stale;
 * `maxAgeMs` only has to be far longer than an enqueue takes between reservation and rows.
 */
export function generationReservationRule(state: GenerationState, maxAgeMs: number): StaleReservationRule {
  return { prefix: PAID_REQUEST_KINDS.generation, maxAgeMs, inUse: (ids) => state.reservationsInUse(ids) };
}
