import { Module, type DynamicModule, type Type } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { IMAGE_GENERATION_QUEUE, VIDEO_GENERATION_QUEUE } from '@atelier/contracts';
import { GenerationRenderer, GenerationRunner, GenerationsModule } from '@atelier/generations';
import { EnginesModule } from '@atelier/engines';
import { ModelCatalogModule } from '@atelier/models';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';
import { EngineRenderer } from './engine-renderer';
import { ImageGenerationProcessor, VideoGenerationProcessor } from './generation.processor';
import { GenerationSweeper } from './generation-sweeper.service';

/**
 * Runs queued generations. Image and video pools are separate queues: deploy the app twice
 * with QUEUE_WORKER_POOLS=image or =video to scale them independently (default: both).
 */
@Module({})
export class QueueWorkerModule {
  static forRoot(config: AppConfig, opts: { renderer?: Type<GenerationRenderer> } = {}): DynamicModule {
    const pools = config.QUEUE_WORKER_POOLS;
    const consumes = [
      ...(pools.includes('image') ? [IMAGE_GENERATION_QUEUE] : []),
      ...(pools.includes('video') ? [VIDEO_GENERATION_QUEUE] : []),
    ];
    return {
      module: QueueWorkerModule,
      imports: [
        ServiceRuntimeModule.forRoot({ service: 'queue-worker', config, consumes }),
        ModelCatalogModule.forRoot(config.MODEL_CATALOG_DIR),
        StorageModule,
        GenerationsModule,
        EnginesModule.forRoot(config),
      ],
      providers: [
        { provide: GenerationRenderer, useClass: opts.renderer ?? EngineRenderer },
        GenerationRunner,
        GenerationSweeper,
        ...(pools.includes('image') ? [ImageGenerationProcessor] : []),
        ...(pools.includes('video') ? [VideoGenerationProcessor] : []),
      ],
    };
  }
}
