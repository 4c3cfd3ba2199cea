import { Global, Module, type DynamicModule } from '@nestjs/common';
import { NamespacesRepository } from '@atelier/auth';
import { ModelCatalog, defaultCatalogDir } from './model-catalog';
import { DeployedModels } from './deployed-models.service';
import { DeploymentsRepository } from './deployments.repository';

/** The catalog, loaded once at start and shared by every module of the app. */
@Global()
@Module({})
export class ModelCatalogModule {
  static forRoot(dir?: string): DynamicModule {
    return {
      module: ModelCatalogModule,
      providers: [{ provide: ModelCatalog, useFactory: () => ModelCatalog.fromDirectory(dir ?? defaultCatalogDir()) }, NamespacesRepository, DeploymentsRepository, DeployedModels],
      exports: [ModelCatalog, DeploymentsRepository, DeployedModels],
    };
  }
}
