import { Module, type DynamicModule } from '@nestjs/common';
import { BillingModule, StaleReservationsModule, PAID_REQUEST_KINDS } from '@atelier/billing';
import type { AppConfig } from '@atelier/config';
import { ModelCatalogModule } from '@atelier/models';
import { QueueGatewayModule } from '@atelier/queue';
import { StorageModule } from '@atelier/storage';
import { BatchFinalize } from './batch-finalize.use-case';
import { BatchLineProcessor } from './batch-line.processor';
import { BatchStepProcessor } from './batch-step.processor';
import { BatchSweeper } from './batch-sweeper.service';
import { BatchValidation } from './batch-validation.use-case';
import { BatchEvents } from './batch-events.service';
import { BatchesRepository } from './batches.repository';
import { BATCH_LINE_RUNNERS } from './line-runners/batch-line-runners';
import { FilesRepository } from './files.repository';

/** Longest a batch line's reservation can rightly stay open: the 24 h window, and a day more for a line that ran into it. */
const BATCH_RESERVATION_MAX_AGE_MS = 48 * 3600_000;

@Module({ providers: [BatchesRepository], exports: [BatchesRepository] })
class BatchDataModule {}

/**
 * The batch pool, run by queue-workers whose QUEUE_WORKER_POOLS names `batch` (their app consumes
 * BATCH_STEP_QUEUE and BATCH_LINE_QUEUE): validation, the lines, the final files, the sweep.
 */
@Module({})
export class BatchServiceModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: BatchServiceModule,
      imports: [
        BillingModule,
        BatchDataModule,
        QueueGatewayModule,
        StorageModule,
        ModelCatalogModule.forRoot(config.MODEL_CATALOG_DIR),
        StaleReservationsModule.forRoot({
          imports: [BatchDataModule],
          inject: [BatchesRepository],
          // A line's reservation is open while the line waits or runs; past two days nothing can settle it.
          useFactory: (batches: BatchesRepository) => [{ prefix: PAID_REQUEST_KINDS.batch, maxAgeMs: BATCH_RESERVATION_MAX_AGE_MS, inUse: (ids: string[]) => batches.reservationsInUse(ids) }],
        }),
      ],
      providers: [FilesRepository, BatchEvents, BatchValidation, BatchFinalize, BatchLineProcessor, BatchStepProcessor, BatchSweeper, ...BATCH_LINE_RUNNERS],
    };
  }
}
