import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { FineTuneServiceModule } from '@atelier/fine-tunes';

/** Fine-tunes: consumes fine-tune-tokenize and tokenizes datasets (see @atelier/fine-tunes). */
@Module({})
export class FineTuneModule {
  static forRoot(config: AppConfig): DynamicModule {
    return { module: FineTuneModule, imports: [FineTuneServiceModule.forRoot(config)] };
  }
}
