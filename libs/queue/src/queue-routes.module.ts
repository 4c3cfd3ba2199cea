import { Module } from '@nestjs/common';
import { QueueBoard } from './queue-board';
import { QueueGatewayModule } from './queue-gateway.module';
import { QueueController } from './queue.controller';
import { WebhooksController } from './webhooks.controller';

/**
 * The queue's HTTP routes on the gateway (enqueue, poll, list, cancel, webhook secrets, the Bull
 * Board). Apart from QueueGatewayModule, which the queue-worker imports too and must not serve.
 */
@Module({ imports: [QueueGatewayModule], controllers: [QueueController, WebhooksController], providers: [QueueBoard] })
export class QueueRoutesModule {}
