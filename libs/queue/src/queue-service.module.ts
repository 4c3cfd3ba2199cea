import { Module, type DynamicModule } from '@nestjs/common';
import { QueueWeights } from '@atelier/accounts';
import { StaleReservationsModule } from '@atelier/billing';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { BATCH_LINE_QUEUE, BATCH_STEP_QUEUE, IMAGE_GENERATION_QUEUE, VIDEO_GENERATION_QUEUE, WEBHOOK_DELIVERY_QUEUE } from '@atelier/contracts';
import { EnginesModule } from '@atelier/media';
import { ModelCatalogModule } from '@atelier/models';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';
import { ImageGenerationProcessor, VideoGenerationProcessor } from './generation.processor';
import { GenerationRunner } from './generation-runner';
import { GenerationState, generationReservationRule } from './generation-state';
import { GenerationSweeper } from './generation-sweeper.service';
import { NamespaceShare } from './namespace-share';
import { QueueGatewayModule } from './queue-gateway.module';
import { WebhookDeliveryProcessor } from './webhook-delivery.processor';

/**
 * Everything the queue worker runs: the generation pools, the sweeper that repairs what a crash
 * leaves behind, and the release of reservations no generation row owns. Image and video pools
 * are separate queues: deploy the app twice with QUEUE_WORKER_POOLS=image or =video to scale
 * them independently (default: image, video and batch). Every queue-worker also delivers webhooks.
 */
@Module({})
export class QueueServiceModule {
  static forRoot(config: AppConfig): DynamicModule {
    const pools = config.QUEUE_WORKER_POOLS;
    const consumes = [
      ...(pools.includes('image') ? [IMAGE_GENERATION_QUEUE] : []),
      ...(pools.includes('video') ? [VIDEO_GENERATION_QUEUE] : []),
      // The batch pool's handlers are libs/batch's BatchServiceModule, which the app adds with it.
      ...(pools.includes('batch') ? [BATCH_STEP_QUEUE, BATCH_LINE_QUEUE] : []),
      // Every queue-worker delivers webhooks, whichever pools it runs.
      WEBHOOK_DELIVERY_QUEUE,
    ];
    return {
      module: QueueServiceModule,
      imports: [
        ServiceRuntimeModule.forRoot({ service: 'queue-worker', config, consumes, concurrency: { [BATCH_LINE_QUEUE.name]: config.BATCH_WORKER_CONCURRENCY } }),
        ModelCatalogModule.forRoot(config.MODEL_CATALOG_DIR),
        StorageModule,
        QueueGatewayModule,
        EnginesModule.forRoot(config),
        StaleReservationsModule.forRoot({
          imports: [QueueGatewayModule],
          inject: [GenerationState, APP_CONFIG],
          // Far older than any enqueue takes between its reservation and its rows.
          useFactory: (state: GenerationState, c: AppConfig) => [generationReservationRule(state, Math.max(60_000, c.GENERATION_SWEEP_INTERVAL_MS * 10))],
        }),
      ],
      providers: [
        GenerationRunner,
        GenerationSweeper,
        NamespaceShare,
        QueueWeights,
        ...(pools.includes('image') ? [ImageGenerationProcessor] : []),
        ...(pools.includes('video') ? [VideoGenerationProcessor] : []),
        WebhookDeliveryProcessor,
      ],
    };
  }
}
