import { Module } from '@nestjs/common';
import { BillingModule } from '@atelier/billing';
import { GenerationQueue } from './generation-queue.service';
import { GenerationState } from './generation-state';

/** Needs ModelCatalog and StorageModule from the importing app. */
@Module({ imports: [BillingModule], providers: [GenerationQueue, GenerationState], exports: [GenerationQueue, GenerationState] })
export class GenerationsModule {}
