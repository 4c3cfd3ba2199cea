import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { QueueServiceModule } from '@atelier/queue';

/** Runs queued generations (see QueueServiceModule in @atelier/queue). */
@Module({})
export class QueueWorkerModule {
  static forRoot(config: AppConfig): DynamicModule {
    return { module: QueueWorkerModule, imports: [QueueServiceModule.forRoot(config)] };
  }
}
