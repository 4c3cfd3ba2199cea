import { Module } from '@nestjs/common';
import { ChatController } from './chat.controller';
import { ChatGatewayModule } from './chat-gateway.module';

/** Chat's HTTP routes on the gateway (POST /api/ai/chat/completions), beside the service they call. */
@Module({ imports: [ChatGatewayModule], controllers: [ChatController] })
export class ChatRoutesModule {}
