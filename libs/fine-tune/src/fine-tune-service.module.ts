import { Module, type DynamicModule } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { BillingModule, StaleReservationsModule } from '@atelier/billing';
import { FINE_TUNE_INSPECT_QUEUE, FINE_TUNE_TOKENIZE_QUEUE } from '@atelier/contracts';
import { ReposGatewayModule } from '@atelier/repos';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';
import { BuiltinTrainer } from './builtin-trainer.service';
import { FineTuneTokenization } from './fine-tune-tokenization.service';
import { FineTuneRuns, fineTuneReservationRule } from './fine-tune-runs.service';
import { TokenizeProcessor } from './tokenize.processor';
import { DatasetInspectionProcessor } from './dataset-inspection.processor';
import { TokenizerRegistry } from './tokenizers';
import { TrainerLeases } from './trainer-leases.service';
import { TrainerSweeper } from './trainer-sweeper.service';
import { Trainers } from './trainers.service';
import { FineTuneDataModule } from './fine-tune-data.module';
import { FineTunesRepository } from './fine-tunes.repository';

/**
 * Everything the fine-tune service runs: the runtime consuming fine-tune-tokenize and
 * fine-tune-inspect, the tokenizers and job handlers, the sweep of lost trainer leases, the
 * release of stale run reservations, and the built-in trainer (BUILTIN_TRAINER).
 */
@Module({})
export class FineTuneServiceModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: FineTuneServiceModule,
      imports: [
        ServiceRuntimeModule.forRoot({ service: 'fine-tune', config, consumes: [FINE_TUNE_TOKENIZE_QUEUE, FINE_TUNE_INSPECT_QUEUE] }),
        StorageModule,
        ReposGatewayModule,
        BillingModule,
        FineTuneDataModule,
        StaleReservationsModule.forRoot({
          imports: [FineTuneDataModule],
          inject: [FineTunesRepository, APP_CONFIG],
          // Far older than a run takes between its reservation and its enqueued state.
          useFactory: (fineTunes: FineTunesRepository, c: AppConfig) => [fineTuneReservationRule(fineTunes, Math.max(60_000, c.TRAINER_SWEEP_INTERVAL_MS * 10))],
        }),
      ],
      providers: [
        FineTuneTokenization,
        { provide: TokenizerRegistry, useFactory: () => new TokenizerRegistry() },
        TokenizeProcessor,
        DatasetInspectionProcessor,
        FineTuneRuns,
        TrainerLeases,
        Trainers,
        TrainerSweeper,
        BuiltinTrainer,
      ],
    };
  }
}
