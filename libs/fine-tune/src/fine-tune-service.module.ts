import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { FINE_TUNE_TOKENIZE_QUEUE } from '@atelier/contracts';
import { ReposGatewayModule } from '@atelier/repos';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';
import { FineTuneTokenization } from './fine-tune-tokenization.service';
import { TokenizeProcessor } from './tokenize.processor';
import { TokenizerRegistry } from './tokenizers';

/** Everything the fine-tune service runs: the runtime consuming fine-tune-tokenize, storage, the tokenizers and the job handler. */
@Module({})
export class FineTuneServiceModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: FineTuneServiceModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'fine-tune', config, consumes: [FINE_TUNE_TOKENIZE_QUEUE] }), StorageModule, ReposGatewayModule],
      providers: [FineTuneTokenization, { provide: TokenizerRegistry, useFactory: () => new TokenizerRegistry() }, TokenizeProcessor],
    };
  }
}
