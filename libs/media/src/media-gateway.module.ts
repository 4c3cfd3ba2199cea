import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import { MediaGenerations } from './media-generation.service';

/** The gateway's media wiring (needs the global ModelCatalogModule, StorageModule and ServiceRuntimeModule). */
@Module({ imports: [AuthModule, BillingModule], providers: [MediaGenerations], exports: [MediaGenerations] })
export class MediaGatewayModule {}
