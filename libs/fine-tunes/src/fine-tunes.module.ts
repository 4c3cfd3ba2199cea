import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { FINE_TUNE_TOKENIZE_QUEUE } from '@atelier/contracts';
import { RepositoriesModule } from '@atelier/repositories';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';
import { FineTuneTokenization } from './fine-tune-tokenization.service';
import { FineTunesService } from './fine-tunes.service';
import { TokenizeProcessor } from './tokenize.processor';
import { TokenizerRegistry } from './tokenizers';

/**
 * Fine-tunes for the gateway (FineTunesService). Needs the runtime (Prisma, JobQueues, config)
 * and StorageModule from the app.
 */
@Module({
  imports: [RepositoriesModule],
  providers: [FineTunesService, FineTuneTokenization, { provide: TokenizerRegistry, useFactory: () => new TokenizerRegistry() }],
  exports: [FineTunesService, FineTuneTokenization, TokenizerRegistry],
})
export class FineTunesModule {}

/** Everything the fine-tune service runs: the runtime consuming fine-tune-tokenize, storage, the job handler. */
@Module({})
export class FineTuneServiceModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: FineTuneServiceModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'fine-tune', config, consumes: [FINE_TUNE_TOKENIZE_QUEUE] }), StorageModule, FineTunesModule],
      providers: [TokenizeProcessor],
    };
  }
}
