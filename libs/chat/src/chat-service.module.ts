import { Module, type DynamicModule } from '@nestjs/common';
import { PAID_REQUEST_KINDS, StaleReservationsModule, syncReservationMaxAgeMs } from '@atelier/billing';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { CHAT_COMPLETION_QUEUE, EMBEDDINGS_QUEUE } from '@atelier/contracts';
import { LoraAdapters, ModelCatalogModule } from '@atelier/models';
import { LoraReconciler } from './lora-reconciler.service';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';
import { ChatCompletionProcessor } from './chat-completion.processor';
import { ChatCompletionRunner } from './chat-completion.runner';
import { EmbeddingsProcessor } from './embeddings/embeddings.processor';
import { EmbeddingsRunner } from './embeddings/embeddings.runner';

/**
 * Everything the chat service runs: the runtime consuming the chat-completion and embeddings queues, the
 * catalog, the queue's handler, and the sweep of chat reservations a crashed gateway left
 * open. apps/chat boots exactly this; integration tests boot it next to a gateway.
 */
@Module({})
export class ChatServiceModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: ChatServiceModule,
      imports: [
        ServiceRuntimeModule.forRoot({ service: 'chat', config, consumes: [CHAT_COMPLETION_QUEUE, EMBEDDINGS_QUEUE] }),
        ModelCatalogModule.forRoot(config.MODEL_CATALOG_DIR),
        // Deployed fine-tunes' files (their adapters).
        StorageModule,
        StaleReservationsModule.forRoot({
          inject: [APP_CONFIG],
          useFactory: (c: AppConfig) => [{ prefix: PAID_REQUEST_KINDS.chat, maxAgeMs: syncReservationMaxAgeMs(c) }],
        }),
      ],
      providers: [ChatCompletionRunner, ChatCompletionProcessor, EmbeddingsRunner, EmbeddingsProcessor, LoraAdapters, LoraReconciler],
    };
  }
}
