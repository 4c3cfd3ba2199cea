import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import { ChatCompletionsService } from './chat-completions.service';
import { EmbeddingsService } from './embeddings/embeddings.service';
import { FeedbackRepository } from './stored-completions/feedback.repository';
import { StoredCompletionsRepository } from './stored-completions/stored-completions.repository';
import { StoredCompletions } from './stored-completions/stored-completions.service';
import { Experiments } from './experiments/experiments.service';
import { ExperimentsRepository } from './experiments/experiments.repository';

/** The gateway's chat wiring (needs the global ModelCatalogModule and ServiceRuntimeModule). */
@Module({
  imports: [AuthModule, BillingModule],
  providers: [ChatCompletionsService, EmbeddingsService, StoredCompletions, StoredCompletionsRepository, FeedbackRepository, Experiments, ExperimentsRepository],
  exports: [ChatCompletionsService, EmbeddingsService, StoredCompletions, StoredCompletionsRepository, FeedbackRepository, Experiments, ExperimentsRepository],
})
export class ChatGatewayModule {}
