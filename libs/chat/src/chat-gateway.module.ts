import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import { ChatCompletionsService } from './chat-completions.service';
import { EmbeddingsService } from './embeddings/embeddings.service';

/** The gateway's chat wiring (needs the global ModelCatalogModule and ServiceRuntimeModule). */
@Module({
  imports: [AuthModule, BillingModule],
  providers: [ChatCompletionsService, EmbeddingsService],
  exports: [ChatCompletionsService, EmbeddingsService],
})
export class ChatGatewayModule {}
