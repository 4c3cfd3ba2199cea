import { Module, type DynamicModule } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import type { AppConfig } from '@atelier/config';
import { CHAT_COMPLETION_QUEUE } from '@atelier/contracts';
import { ModelCatalogModule } from '@atelier/models';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { ChatCompletionProcessor } from './chat-completion.processor';
import { StaleChatReservations } from './stale-chat-reservations.service';
import { ChatCompletionRunner } from './chat-completion.runner';
import { ChatCompletionsService } from './chat-completions.service';
import { ChatUsageRecorder } from './chat-usage.recorder';

/** The gateway's chat wiring (needs the global ModelCatalogModule and ServiceRuntimeModule). */
@Module({
  imports: [AuthModule, BillingModule],
  providers: [ChatCompletionsService, ChatUsageRecorder],
  exports: [ChatCompletionsService, ChatUsageRecorder],
})
export class ChatGatewayModule {}

/**
 * Everything the chat service runs: the runtime consuming the chat-completion queue, the
 * catalog, and the queue's handler. apps/chat boots exactly this; integration tests boot it
 * next to a gateway.
 */
@Module({})
export class ChatServiceModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: ChatServiceModule,
      imports: [
        ServiceRuntimeModule.forRoot({ service: 'chat', config, consumes: [CHAT_COMPLETION_QUEUE] }),
        BillingModule,
        ModelCatalogModule.forRoot(config.MODEL_CATALOG_DIR),
      ],
      providers: [ChatCompletionRunner, ChatCompletionProcessor, StaleChatReservations],
    };
  }
}
