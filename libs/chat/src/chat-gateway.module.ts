import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import { ChatCompletionsService } from './chat-completions.service';

/** The gateway's chat wiring (needs the global ModelCatalogModule and ServiceRuntimeModule). */
@Module({
  imports: [AuthModule, BillingModule],
  providers: [ChatCompletionsService],
  exports: [ChatCompletionsService],
})
export class ChatGatewayModule {}
