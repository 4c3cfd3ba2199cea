import { Injectable, Logger } from '@nestjs/common';
import { USER_EVENTS_CHANNEL, WEBHOOK_DELIVERY_QUEUE } from '@atelier/contracts';
import type { Prisma } from '@atelier/db';
import { BroadcastBus, errorSummary, JobQueues, UserEventLog } from '@atelier/runtime';
import { batchId, batchObject } from './batch-object';
import { BatchesRepository, type BatchTx } from './batches.repository';

/**
 * A batch's status changes, each as one transition plus its event in one transaction (the
 * outbox), then published: to the owner's event stream as `batch.status` (retained first, so
 * its SSE id is its id in the owner's log, and Last-Event-ID resumes past it), and as a signed
 * webhook message when the batch was given one. A change whose publication is lost (a crash right
 * after the commit) is published by BatchSweeper.
 */
@Injectable()
export class BatchEvents {
  private readonly logger = new Logger(BatchEvents.name);

  constructor(
    private readonly batches: BatchesRepository,
    private readonly events: UserEventLog,
    private readonly bus: BroadcastBus,
    private readonly queues: JobQueues,
  ) {}

  /**
   * Moves the batch from one of `from` to `to` with `data` and records the event, in `tx` when
   * given (then the caller announces after its commit), else in a transaction of its own,
   * announced here. False when the batch was in none of `from`: nothing changed.
   */
  async transition(id: string, from: readonly string[], to: string, data: Prisma.BatchUncheckedUpdateManyInput, tx?: BatchTx): Promise<boolean> {
    const move = async (t: BatchTx) => {
      if (!(await this.batches.transition(id, from, to, data, t))) return false;
      await this.recordIn(t, id);
      return true;
    };
    if (tx) return move(tx);
    const moved = await this.batches.inTransaction(move);
    if (moved) await this.announce(id);
    return moved;
  }

  /**
   * Records the batch as it is now in `tx` as a status change's event: for a transition whose
   * transaction changes more than the batch (lines written, dropped), recorded last so the event
   * shows them. The caller announces after the commit.
   */
  async recordIn(tx: BatchTx, id: string): Promise<void> {
    const row = await this.batches.byId(id, tx);
    if (!row) return;
    const data = batchObject(row, await this.batches.tally(id, tx));
    const webhookId = row.webhookUrl ? `msg_${id.replace(/-/g, '')}_${row.status}` : null;
    await this.batches.recordEvent(tx, { batchId: id, userId: row.userId, data: data as unknown as Prisma.InputJsonValue, webhookUrl: row.webhookUrl, webhookId });
  }

  /** Publishes the batch's recorded events (right after the transition commits). Never throws: the sweep retries. */
  async announce(id: string): Promise<void> {
    await this.publishPending(id).catch((err: unknown) => this.logger.warn(`batch.status of ${batchId(id)} not published yet (${errorSummary(err)}); the sweep will`));
  }

  /** Published again (the sweep), an event keeps the id its first append got. */
  async publishPending(id: string): Promise<void> {
    await this.batches.publishEvents(id, async (row) => {
      const outboxId = `batch:${row.id}`;
      const eventId = await this.events.append(row.user_id, { userId: row.user_id, type: 'batch.status', data: row.data, outboxId }, outboxId);
      await this.bus.publish(USER_EVENTS_CHANNEL, { userId: row.user_id, type: 'batch.status', data: row.data, event_id: eventId });
      if (row.webhook_url && row.webhook_id)
        await this.queues.add(
          WEBHOOK_DELIVERY_QUEUE,
          { webhookId: row.webhook_id, batchId: id, namespaceId: row.namespace_id, type: 'batch.status', url: row.webhook_url, timestamp: new Date().toISOString(), data: row.data, attempt: 1, requestId: id },
          { jobId: `${row.webhook_id}.1` },
        );
    });
  }

  /** Events a process recorded and died before publishing: published again after `olderThanMs`. */
  async publishStranded(olderThanMs: number): Promise<number> {
    const stranded = await this.batches.withStrandedEvents(olderThanMs);
    for (const id of stranded) await this.publishPending(id);
    return stranded.length;
  }
}
