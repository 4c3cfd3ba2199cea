import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ClusterSweeps, errorSummary } from '@atelier/runtime';
import { FineTuneRuns } from './fine-tune-runs.service';
import { TrainerLeases } from './trainer-leases.service';
import { FineTunesRepository } from './fine-tunes.repository';

/**
 * In the fine-tune service: hands the runs of lost leases back (or ends them), publishes the
 * fine_tune.status events a crashed process recorded but never published (the outbox), and
 * enqueues runs whose tokenization ended while the service that would enqueue them crashed.
 */
@Injectable()
export class TrainerSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(TrainerSweeper.name);
  private periodic?: { stop(): Promise<void> };

  constructor(
    private readonly sweeps: ClusterSweeps,
    private readonly leases: TrainerLeases,
    private readonly runs: FineTuneRuns,
    private readonly fineTunes: FineTunesRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.periodic = this.sweeps.every('trainer-leases', this.config.TRAINER_SWEEP_INTERVAL_MS, () => this.sweep(), (err) => this.logger.warn(`Sweep failed: ${errorSummary(err)}`));
  }

  async sweep(): Promise<void> {
    await this.leases.sweepLost();
    // Events whose publisher died between the transition's commit and the publication.
    await this.runs.publishStranded(Math.max(5_000, this.config.TRAINER_SWEEP_INTERVAL_MS * 2));
    const waiting = await this.fineTunes.waitingToRun(new Date(Date.now() - this.config.TRAINER_SWEEP_INTERVAL_MS), 100);
    for (const id of waiting) await this.runs.enqueueAfterTokenization(id);
  }

  async onModuleDestroy(): Promise<void> {
    await this.periodic?.stop();
  }
}
