import { Module, type DynamicModule } from '@nestjs/common';
import { AccountsModule } from '@atelier/accounts';
import { AuthModule } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import type { AppConfig } from '@atelier/config';
import { ModelCatalog, defaultCatalogDir } from '@atelier/models';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';
import { AdminController } from './admin.controller';
import { CreditsController } from './credits.controller';
import { FilesController } from './files.controller';
import { ModelsController } from './models.controller';

/** The only public HTTP edge: authenticates, validates, and hands work to the services. */
@Module({})
export class GatewayModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: GatewayModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'gateway', config }), AuthModule, AccountsModule, BillingModule, StorageModule],
      controllers: [AdminController, CreditsController, FilesController, ModelsController],
      providers: [
        { provide: ModelCatalog, useFactory: () => ModelCatalog.fromDirectory(config.MODEL_CATALOG_DIR ?? defaultCatalogDir()) },
      ],
    };
  }
}
