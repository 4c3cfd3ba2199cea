import { Module, type DynamicModule } from '@nestjs/common';
import { AccountsModule } from '@atelier/accounts';
import { AuthModule } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import { ChatGatewayModule } from '@atelier/chat';
import type { AppConfig } from '@atelier/config';
import { EventsServiceModule } from '@atelier/events';
import { MediaGatewayModule } from '@atelier/media';
import { QueueGatewayModule } from '@atelier/queue';
import { ModelCatalogModule } from '@atelier/models';
import { FineTuneGatewayModule } from '@atelier/fine-tune';
import { ReposGatewayModule } from '@atelier/repos';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';
import { AdminController } from './admin.controller';
import { ApiDocsController } from './api-docs.controller';
import { ChatController } from './chat.controller';
import { CreditsController } from './credits.controller';
import { FilesController } from './files.controller';
import { MediaController } from './media.controller';
import { FineTunesController } from './fine-tunes.controller';
import { ModelsController } from './models.controller';
import { QueueBoard } from './queue-board';
import { QueueController } from './queue.controller';
import { ReposController } from './repos.controller';
import { IdempotencyModule } from '@atelier/idempotency';
import { WebhooksController } from './webhooks.controller';
import { ApiKeysController } from './api-keys.controller';
import { UsageController } from './usage.controller';
import { FineTuneCatalogController } from './fine-tune-catalog.controller';
import { MembershipsController } from './memberships.controller';

/** The only public HTTP edge: authenticates, validates, and hands work to the services. */
@Module({})
export class GatewayModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: GatewayModule,
      imports: [
        ServiceRuntimeModule.forRoot({ service: 'gateway', config }),
        ModelCatalogModule.forRoot(config.MODEL_CATALOG_DIR), AuthModule, AccountsModule, BillingModule, StorageModule, QueueGatewayModule, EventsServiceModule,
        ReposGatewayModule,
        FineTuneGatewayModule,
        ChatGatewayModule,
        MediaGatewayModule,
        IdempotencyModule],
      controllers: [AdminController, ApiDocsController, ChatController, CreditsController, FilesController, MediaController, ModelsController, QueueController, ReposController, FineTunesController, FineTuneCatalogController, WebhooksController, ApiKeysController, UsageController, MembershipsController],
      providers: [QueueBoard],
    };
  }
}
