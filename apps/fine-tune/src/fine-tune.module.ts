import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { ServiceRuntimeModule } from '@atelier/runtime';

/** Fine-tunes: consumes fine-tune-tokenize. */
@Module({})
export class FineTuneModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: FineTuneModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'fine-tune', config, consumes: [] })],
    };
  }
}
