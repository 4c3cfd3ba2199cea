import { Module } from '@nestjs/common';
import { NamespaceAccess } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import { GenerationQueue } from './generation-queue.service';
import { GenerationState } from './generation-state';

/**
 * Needs ModelCatalog and StorageModule from the importing app. NamespaceAccess (Prisma only) is
 * provided here rather than via AuthModule, whose global guard the queue-worker must not get.
 */
@Module({ imports: [BillingModule], providers: [GenerationQueue, GenerationState, NamespaceAccess], exports: [GenerationQueue, GenerationState] })
export class QueueGatewayModule {}
