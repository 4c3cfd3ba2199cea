import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { ServiceRuntimeModule } from '@atelier/runtime';

/** Synchronous image/edit/video rendering: consumes media-render. */
@Module({})
export class MediaModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: MediaModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'media', config, consumes: [] })],
    };
  }
}
