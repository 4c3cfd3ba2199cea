import { Injectable, Logger } from '@nestjs/common';
import type { Caller } from '@atelier/auth';
import { CreditLedger, PaidRequests, reservationReference } from '@atelier/billing';
import { CANCEL_JOBS_CHANNEL } from '@atelier/contracts';
import { BroadcastBus, JobQueues } from '@atelier/runtime';
import { queueFor } from './generation-dispatcher';
import { GenerationsRepository } from './generations.repository';
import { QueuePositions } from './queue-positions';
import { ReadGenerations } from './read-generations.use-case';
import { WebhookNotifier } from './webhook-notifier.service';

/** DELETE /api/ai/queue/:id. */
@Injectable()
export class CancelGeneration {
  private readonly logger = new Logger(CancelGeneration.name);

  constructor(
    private readonly reads: ReadGenerations,
    private readonly generations: GenerationsRepository,
    private readonly ledger: CreditLedger,
    private readonly paid: PaidRequests,
    private readonly queues: JobQueues,
    private readonly positions: QueuePositions,
    private readonly webhooks: WebhookNotifier,
    private readonly bus: BroadcastBus,
  ) {}

  /**
   * Active -> cancelled with the reservation released; a queued job is removed, a running one
   * is told to abort. A terminal generation is left as it is. Never emits a completion event.
   * Its completed webhook, if it asked for one, goes through the outbox with the transition
   * (a row that broadcasts nothing): a gateway that dies before queuing it leaves it to the
   * outbox sweeper, which queues it under the same message id.
   */
  async cancel(caller: Caller, id: string): Promise<{ status: 'success'; generation_id: string }> {
    const row = await this.reads.findVisible(caller, id);
    const wantsWebhook = (row.params as { webhook?: unknown } | null)?.webhook !== undefined;
    const cancelled = await this.generations.cancelActive(id, { webhook: wantsWebhook, release: (reservationId, tx) => this.ledger.release(reservationId, tx) });
    if (cancelled) {
      await this.paid.endWork([reservationReference('generation', id)]);
      const contract = queueFor(row.mediaType);
      await this.queues.remove(contract, id);
      await this.positions.remove(row.mediaType, id, row.namespaceId).catch(() => undefined);
      if (wantsWebhook) {
        try {
          await this.webhooks.queueMessage(id, 'completed', row.params);
          await this.generations.markEventPublished(id);
        } catch (err) {
          this.logger.warn(`Completed webhook of cancelled generation ${id} not queued yet (${(err as Error).message}); the outbox sweeper will`);
        }
      }
      await this.bus.publish(CANCEL_JOBS_CHANNEL, { queue: contract.name, jobIds: [id], reason: 'cancelled by the user' }).catch(() => undefined);
    }
    return { status: 'success', generation_id: id };
  }
}
