import { Module, type DynamicModule } from '@nestjs/common';
import { PAID_REQUEST_KINDS, StaleReservationsModule, syncReservationMaxAgeMs } from '@atelier/billing';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { IMAGE_RENDER_QUEUE, VIDEO_RENDER_QUEUE } from '@atelier/contracts';
import { ModelCatalogModule } from '@atelier/models';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';
import type { EngineEnvironment } from './engine';
import { EnginesModule } from './engines.module';
import { ImageRenderProcessor, VideoRenderProcessor } from './media-render.processor';

/**
 * The media service: consumes the image and video render queues, and releases the reservations
 * of synchronous generations whose gateway died before settling. The media app boots it;
 * gateway tests boot it in-process next to a gateway.
 */
@Module({})
export class MediaServiceModule {
  static forRoot(config: AppConfig, overrides: Partial<EngineEnvironment> = {}): DynamicModule {
    return {
      module: MediaServiceModule,
      imports: [
        ServiceRuntimeModule.forRoot({ service: 'media', config, consumes: [IMAGE_RENDER_QUEUE, VIDEO_RENDER_QUEUE] }),
        ModelCatalogModule.forRoot(config.MODEL_CATALOG_DIR),
        StorageModule,
        EnginesModule.forRoot(config, overrides),
        StaleReservationsModule.forRoot({
          inject: [APP_CONFIG],
          useFactory: (c: AppConfig) => [{ prefix: PAID_REQUEST_KINDS.media, maxAgeMs: syncReservationMaxAgeMs(c) }],
        }),
      ],
      providers: [ImageRenderProcessor, VideoRenderProcessor],
    };
  }
}
