import { Module, type DynamicModule } from '@nestjs/common';
import { AccountsModule, AccountsRoutesModule } from '@atelier/accounts';
import { AuthModule } from '@atelier/auth';
import { BillingModule, BillingRoutesModule } from '@atelier/billing';
import { BatchRoutesModule } from '@atelier/batch';
import { ChatRoutesModule } from '@atelier/chat';
import type { AppConfig } from '@atelier/config';
import { COMPLETION_EXPORT_QUEUE, RESPONSE_BACKGROUND_QUEUE } from '@atelier/contracts';
import { EventsServiceModule } from '@atelier/events';
import { FineTuneRoutesModule } from '@atelier/fine-tune';
import { IdempotencyModule } from '@atelier/idempotency';
import { MediaRoutesModule } from '@atelier/media';
import { ModelCatalogModule, ModelsRoutesModule } from '@atelier/models';
import { ApiDocsModule } from '@atelier/openapi';
import { QueueRoutesModule } from '@atelier/queue';
import { ReposRoutesModule } from '@atelier/repos';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';
import { ConsoleController } from './console.controller';
import { FilesController } from './files.controller';

/**
 * The only public HTTP edge: authenticates, validates, and hands work to the services. A shell:
 * each feature's routes live in its lib (the *RoutesModule beside the service they call); here
 * are the wiring and what belongs to no feature (the signed blob URLs of /files).
 */
@Module({})
export class GatewayModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: GatewayModule,
      imports: [
        // Background responses run where the Responses API's code is: on the gateways, off the request.
        ServiceRuntimeModule.forRoot({ service: 'gateway', config, consumes: [RESPONSE_BACKGROUND_QUEUE, COMPLETION_EXPORT_QUEUE], reportsAllQueues: true }),
        ModelCatalogModule.forRoot(config.MODEL_CATALOG_DIR),
        AuthModule,
        AccountsModule,
        BillingModule,
        StorageModule,
        IdempotencyModule,
        EventsServiceModule,
        AccountsRoutesModule,
        BillingRoutesModule,
        ModelsRoutesModule,
        ApiDocsModule,
        ChatRoutesModule,
        MediaRoutesModule,
        QueueRoutesModule,
        ReposRoutesModule,
        FineTuneRoutesModule,
        BatchRoutesModule,
      ],
      controllers: [FilesController, ConsoleController],
    };
  }
}
