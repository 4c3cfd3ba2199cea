import { Module } from '@nestjs/common';
import { NamespaceAccess, NamespacesRepository } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import { CancelGeneration } from './cancel-generation.use-case';
import { EnqueueGenerations } from './enqueue-generations.use-case';
import { GenerationDispatcher } from './generation-dispatcher';
import { GenerationWebhooks } from './generation-webhooks.use-case';
import { GenerationsRepository } from './generations.repository';
import { ReadGenerations } from './read-generations.use-case';
import { GenerationState } from './generation-state';
import { GenerationProgress } from './generation-progress';
import { QueuePositions } from './queue-positions';
import { WebhookNotifier } from './webhook-notifier.service';
import { WebhooksRepository } from './webhooks.repository';

/**
 * Needs ModelCatalog and StorageModule from the importing app. NamespaceAccess (Prisma only) is
 * provided here rather than via AuthModule, whose global guard the queue-worker must not get.
 */
@Module({
  imports: [BillingModule],
  providers: [
    GenerationsRepository,
    GenerationDispatcher,
    EnqueueGenerations,
    ReadGenerations,
    CancelGeneration,
    GenerationWebhooks,
    GenerationState,
    NamespaceAccess,
    NamespacesRepository,
    QueuePositions,
    GenerationProgress,
    WebhookNotifier,
    WebhooksRepository,
  ],
  exports: [NamespacesRepository, GenerationsRepository, GenerationDispatcher, EnqueueGenerations, ReadGenerations, CancelGeneration, GenerationWebhooks, GenerationState, QueuePositions, GenerationProgress, WebhookNotifier, WebhooksRepository],
})
export class QueueGatewayModule {}
