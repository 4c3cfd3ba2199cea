import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { GenerationServiceModule } from '@atelier/generations';

/** Runs queued generations (see GenerationServiceModule in @atelier/generations). */
@Module({})
export class QueueWorkerModule {
  static forRoot(config: AppConfig): DynamicModule {
    return { module: QueueWorkerModule, imports: [GenerationServiceModule.forRoot(config)] };
  }
}
