import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { FINE_TUNE_INSPECT_QUEUE, FINE_TUNE_TOKENIZE_QUEUE } from '@atelier/contracts';
import { ReposGatewayModule } from '@atelier/repos';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';
import { FineTuneTokenization } from './fine-tune-tokenization.service';
import { TokenizeProcessor } from './tokenize.processor';
import { DatasetInspectionProcessor } from './dataset-inspection.processor';
import { TokenizerRegistry } from './tokenizers';

/** Everything the fine-tune service runs: the runtime consuming fine-tune-tokenize and fine-tune-inspect, storage, the tokenizers and the job handlers. */
@Module({})
export class FineTuneServiceModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: FineTuneServiceModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'fine-tune', config, consumes: [FINE_TUNE_TOKENIZE_QUEUE, FINE_TUNE_INSPECT_QUEUE] }), StorageModule, ReposGatewayModule],
      providers: [FineTuneTokenization, { provide: TokenizerRegistry, useFactory: () => new TokenizerRegistry() }, TokenizeProcessor, DatasetInspectionProcessor],
    };
  }
}
