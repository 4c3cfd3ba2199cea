import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { CreditLedger } from '@atelier/billing';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { BATCH_STEP_QUEUE } from '@atelier/contracts';
import { ClusterSweeps, errorSummary, JobQueues } from '@atelier/runtime';
import { BatchEvents } from './batch-events.service';
import { BatchValidation } from './batch-validation.use-case';
import { batchId } from './batch-object';
import { stepJob } from './batch-steps';
import { BatchesRepository } from './batches.repository';

/** Sweeps a batch must stand still for before its step (or its lines' jobs) count as lost: a minute at the default interval. */
const LOST_AFTER_SWEEPS = 12;

/**
 * Every BATCH_SWEEP_INTERVAL_MS on each queue-worker running the batch pool: batches past their
 * 24 h window expire (lines not yet started end `batch_expired` and give their reservations back
 * in the same transaction; running ones finish, and are kept and charged), batches whose
 * step was lost get it again, lines whose job was lost (none of the batch's lines started or ended
 * for a minute) are queued again, and batch.status events whose publication was lost are published. Each change is guarded by the batch's or the line's state, so
 * replicas sweeping at once do each thing once.
 */
@Injectable()
export class BatchSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(BatchSweeper.name);
  private periodic?: { stop(): Promise<void> };

  constructor(
    private readonly sweeps: ClusterSweeps,
    private readonly batches: BatchesRepository,
    private readonly ledger: CreditLedger,
    private readonly queues: JobQueues,
    private readonly events: BatchEvents,
    private readonly validation: BatchValidation,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'BATCH_SWEEP_INTERVAL_MS'>,
  ) {}

  /** A batch in a step this long without moving on lost its step's job (Redis lost it, or it failed for good). */
  private get lostAfterMs(): number {
    return LOST_AFTER_SWEEPS * this.config.BATCH_SWEEP_INTERVAL_MS;
  }

  onApplicationBootstrap(): void {
    this.periodic = this.sweeps.every('batches', this.config.BATCH_SWEEP_INTERVAL_MS, () => this.sweep(), (err) => this.logger.warn(`Batch sweep failed: ${errorSummary(err)}`));
  }

  async sweep(now = new Date()): Promise<void> {
    await this.events.publishStranded(this.lostAfterMs / 4);
    for (const batch of await this.batches.expired(now)) await this.expire(batch.id, batch.requestId);
    for (const batch of await this.batches.stuck(['validating'], this.lostAfterMs)) await stepJob(this.queues, batch.id, 'validate', batch.requestId);
    for (const batch of await this.batches.stuck(['in_progress', 'cancelling', 'finalizing'], this.lostAfterMs)) {
      if (await this.batches.hasOpenLines(batch.id)) {
        // Lines wait, and none has started or ended for a while: their jobs may be gone.
        const last = batch.status === 'in_progress' ? await this.batches.lastLineActivity(batch.id) : now;
        if (last === null || now.getTime() - last.getTime() > this.lostAfterMs) await this.validation.redispatch(batch.id);
        continue;
      }
      // A kept job of the same id (one that found nothing to do, or failed for good) would swallow the add.
      const job = await this.queues.queue(BATCH_STEP_QUEUE).getJob(`finalize-${batch.id}`);
      if (job && ((await job.isActive()) || (await job.isWaiting()) || (await job.isDelayed()))) continue;
      await job?.remove().catch(() => undefined);
      await stepJob(this.queues, batch.id, 'finalize', batch.requestId);
    }
  }

  /** The window passed: unstarted lines end `batch_expired`, uncharged; the batch ends once its running lines do. */
  private async expire(id: string, requestId: string): Promise<void> {
    const expiredValidating = await this.events.transition(id, ['validating'], 'expired', { expiredAt: new Date() });
    if (expiredValidating) return;
    const dropped = await this.batches.inTransaction(async (tx) => {
      const reservations = await this.batches.dropPending(id, 'expired', { code: 'batch_expired', message: 'This request was not run before the batch expired' }, tx);
      for (const r of reservations) await this.ledger.release(r, tx);
      return reservations.length;
    });
    if (dropped > 0) this.logger.log(`Batch ${batchId(id)} expired with ${dropped} request(s) not run`);
    if ((await this.batches.tally(id)).running === 0) await stepJob(this.queues, id, 'finalize', requestId).catch(() => undefined);
  }

  async onModuleDestroy(): Promise<void> {
    await this.periodic?.stop();
  }
}
