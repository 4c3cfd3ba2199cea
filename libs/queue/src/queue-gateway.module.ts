import { Module } from '@nestjs/common';
import { NamespaceAccess } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import { GenerationQueue } from './generation-queue.service';
import { GenerationState } from './generation-state';
import { GenerationProgress } from './generation-progress';
import { QueuePositions } from './queue-positions';
import { WebhookNotifier } from './webhook-notifier.service';
import { WebhookSecrets } from './webhook-secrets.service';

/**
 * Needs ModelCatalog and StorageModule from the importing app. NamespaceAccess (Prisma only) is
 * provided here rather than via AuthModule, whose global guard the queue-worker must not get.
 */
@Module({ imports: [BillingModule], providers: [GenerationQueue, GenerationState, NamespaceAccess, QueuePositions, GenerationProgress, WebhookNotifier, WebhookSecrets],
  exports: [GenerationQueue, GenerationState, QueuePositions, GenerationProgress, WebhookNotifier, WebhookSecrets],
})
export class QueueGatewayModule {}
