import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { MediaServiceModule } from '@atelier/media';

/** Synchronous image/edit/video rendering: consumes media-render-image and media-render-video. */
@Module({})
export class MediaModule {
  static forRoot(config: AppConfig): DynamicModule {
    return { module: MediaModule, imports: [MediaServiceModule.forRoot(config)] };
  }
}
