import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { FineTuneServiceModule } from '@atelier/fine-tune';

/** Fine-tunes: consumes fine-tune-tokenize and tokenizes datasets (see @atelier/fine-tune). */
@Module({})
export class FineTuneModule {
  static forRoot(config: AppConfig): DynamicModule {
    return { module: FineTuneModule, imports: [FineTuneServiceModule.forRoot(config)] };
  }
}
