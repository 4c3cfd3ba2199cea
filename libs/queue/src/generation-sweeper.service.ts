import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ClusterSweeps, errorSummary, JobQueues } from '@atelier/runtime';
import { GenerationDispatcher, queueFor } from './generation-dispatcher';
import { GenerationState } from './generation-state';
import { QueuePositions } from './queue-positions';
import { QueueWeights } from '@atelier/accounts';

/**
 * Repairs what a crash between two steps can leave behind: queued rows whose job never reached
 * Redis (re-added; jobId = generation id makes that idempotent), committed events never
 * published (outbox), and processing rows whose job BullMQ has given up on (failed as lost).
 * Reservations whose rows were never written are released by the stale-reservation sweep
 * (generationReservationRule).
 */
@Injectable()
export class GenerationSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(GenerationSweeper.name);
  private periodic?: { stop(): Promise<void> };

  constructor(
    private readonly sweeps: ClusterSweeps,
    private readonly state: GenerationState,
    private readonly dispatcher: GenerationDispatcher,
    private readonly queues: JobQueues,
    private readonly positions: QueuePositions,
    private readonly weights: QueueWeights,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    // A Redis that lost its data (or missed a change while away) gets the weights back from Postgres.
    void this.weights.restore().catch((err: unknown) => this.logger.warn(`Restoring queue weights failed: ${errorSummary(err)}`));
    this.periodic = this.sweeps.every('generations', this.config.GENERATION_SWEEP_INTERVAL_MS, () => this.sweep(), (err) => this.logger.warn(`Sweep failed: ${errorSummary(err)}`));
  }

  async sweep(): Promise<void> {
    // Redis restarted without its data: the weights come back from Postgres within a sweep.
    if (await this.weights.restoreIfLost()) this.logger.log('Queue weights restored from Postgres');
    await this.pruneQueuePositions();
    const stranded = await this.state.strandedQueued(this.config.GENERATION_SWEEP_INTERVAL_MS * 2);
    if (stranded.length) await this.dispatcher.dispatch(stranded);
    await this.state.publishStranded(this.config.GENERATION_SWEEP_INTERVAL_MS);
    for (const g of await this.state.longProcessing(this.config.GENERATION_LOST_AFTER_MS)) {
      const jobState = await this.queues.queue(queueFor(g.mediaType)).getJobState(g.id);
      if (jobState === 'failed' || jobState === 'unknown' || jobState === 'completed')
        await this.state.fail(g.id, 'The worker running this generation was lost; no credits were charged');
    }
  }

  /**
   * Drops the head of each pool's queue positions that is no longer queued (its removal was
   * lost to a Redis outage), so positions behind it are not counted one too high.
   */
  private async pruneQueuePositions(): Promise<void> {
    for (const pool of ['image', 'video'] as const) {
      const head = await this.positions.head(pool, 100);
      await this.positions.removeMany(pool, await this.state.notQueuedAmong(head));
    }
  }

  async onModuleDestroy(): Promise<void> {
    await this.periodic?.stop();
  }
}
