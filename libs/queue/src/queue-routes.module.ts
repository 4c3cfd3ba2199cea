import { Module } from '@nestjs/common';
import { QueueAdminController } from './queue-admin.controller';
import { QueueBacklog } from './queue-backlog.service';
import { QueueBoard } from './queue-board';
import { QueueGatewayModule } from './queue-gateway.module';
import { QueueController } from './queue.controller';
import { WebhooksController } from './webhooks.controller';

/**
 * The queue's HTTP routes on the gateway (enqueue, poll, list, cancel, webhook secrets, the Bull
 * Board). Apart from QueueGatewayModule, which the queue-worker imports too and must not serve.
 */
@Module({ imports: [QueueGatewayModule], controllers: [QueueController, WebhooksController, QueueAdminController], providers: [QueueBoard, QueueBacklog] })
export class QueueRoutesModule {}
