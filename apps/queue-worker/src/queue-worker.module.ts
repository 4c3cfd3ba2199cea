import { Module, type DynamicModule } from '@nestjs/common';
import { BatchServiceModule } from '@atelier/batch';
import type { AppConfig } from '@atelier/config';
import { QueueServiceModule } from '@atelier/queue';

/** Runs queued generations (see QueueServiceModule in @atelier/queue) and, with the batch pool, batches (BatchServiceModule in @atelier/batch). */
@Module({})
export class QueueWorkerModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: QueueWorkerModule,
      imports: [QueueServiceModule.forRoot(config), ...(config.QUEUE_WORKER_POOLS.includes('batch') ? [BatchServiceModule.forRoot(config)] : [])],
    };
  }
}
