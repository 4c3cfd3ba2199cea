import { Module } from '@nestjs/common';
import { IdempotencyModule } from '@atelier/idempotency';
import { MediaController } from './media.controller';
import { MediaGatewayModule } from './media-gateway.module';

/** Media's HTTP routes on the gateway (images, edits, videos), beside the service they call. */
@Module({ imports: [MediaGatewayModule, IdempotencyModule], controllers: [MediaController] })
export class MediaRoutesModule {}
