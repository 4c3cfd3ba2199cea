import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import type { EngineEnvironment } from './engine';
import { engineEnvironment } from './engine-environment';
import { EngineRegistry } from './engine-registry';
import { MediaRenderer } from './media-renderer.service';

/**
 * Media engines for a service that renders (media, queue-worker): the engine registry and the
 * renderer. The app provides ModelCatalog (ModelCatalogModule) and BlobStore (StorageModule).
 */
@Module({})
export class EnginesModule {
  static forRoot(config: AppConfig, overrides: Partial<EngineEnvironment> = {}): DynamicModule {
    return {
      module: EnginesModule,
      providers: [{ provide: EngineRegistry, useFactory: () => new EngineRegistry(engineEnvironment(config, overrides)) }, MediaRenderer],
      exports: [EngineRegistry, MediaRenderer],
    };
  }
}
