import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ClusterSweeps, errorSummary } from '@atelier/runtime';
import { StoredCompletionsRepository } from './stored-completions.repository';

/** Deleted this many at a time, so a sweep never holds a long lock. */
const SWEEP_BATCH = 1000;

/**
 * Hourly on each gateway: expired stored completions are deleted (they already read as unknown),
 * then each namespace past STORED_COMPLETIONS_MAX_PER_NAMESPACE loses its oldest. Replicas
 * sweeping at once skip each other's rows (SKIP LOCKED).
 */
@Injectable()
export class StoredCompletionsSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(StoredCompletionsSweeper.name);
  private periodic?: { stop(): Promise<void> };

  constructor(
    private readonly sweeps: ClusterSweeps,
    private readonly rows: StoredCompletionsRepository,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'STORED_COMPLETIONS_MAX_PER_NAMESPACE'>,
  ) {}

  onApplicationBootstrap(): void {
    this.periodic = this.sweeps.every('stored-completions', 3600_000, () => this.sweep(), (err) => this.logger.warn(`Sweeping stored completions failed: ${errorSummary(err)}`));
  }

  async onModuleDestroy(): Promise<void> {
    await this.periodic?.stop();
  }

  async sweep(): Promise<{ expired: number; trimmed: number }> {
    let expired = 0;
    for (let n = SWEEP_BATCH; n === SWEEP_BATCH; expired += n) n = await this.rows.deleteExpired(SWEEP_BATCH);
    let trimmed = 0;
    for (const { namespaceId, excess } of await this.rows.overCap(this.config.STORED_COMPLETIONS_MAX_PER_NAMESPACE)) {
      for (let left = excess; left > 0; ) {
        const n = await this.rows.deleteOldest(namespaceId, Math.min(left, SWEEP_BATCH));
        if (n === 0) break;
        left -= n;
        trimmed += n;
      }
    }
    return { expired, trimmed };
  }
}
