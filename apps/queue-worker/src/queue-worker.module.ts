import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { ServiceRuntimeModule } from '@atelier/runtime';

/** Runs queued generations: consumes the generation queue. */
@Module({})
export class QueueWorkerModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: QueueWorkerModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'queue-worker', config, consumes: [] })],
    };
  }
}
