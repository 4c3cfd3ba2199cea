import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { ReposGatewayModule } from '@atelier/repos';
import { ChatController } from './chat.controller';
import { ChatGatewayModule } from './chat-gateway.module';
import { EmbeddingsController } from './embeddings/embeddings.controller';
import { ResponsesRepository } from './responses/responses.repository';
import { ResponsesController } from './responses/responses.controller';
import { ResponsesService } from './responses/responses.service';
import { BackgroundResponses } from './responses/background-responses.service';
import { KeptResponseEvents } from './responses/kept-response-events';
import { MessagesController } from './messages/messages.controller';
import { MessagesService } from './messages/messages.service';
import { FeedbackController, FeedbackMetricsController, StoredCompletionsController } from './stored-completions/stored-completions.controller';
import { FeedbackService } from './stored-completions/feedback.service';
import { ExportCompletions } from './stored-completions/export-completions.use-case';
import { CompletionExportJobs } from './stored-completions/export-completions.processor';
import { CompletionExportsRepository } from './stored-completions/completion-exports.repository';
import { ExperimentsController } from './experiments/experiments.controller';
import { StoredCompletionsSweeper } from './stored-completions/stored-completions-sweeper.service';

/**
 * Chat's HTTP routes on the gateway (POST /api/ai/chat/completions, the Responses and Anthropic
 * Messages APIs that run on the same lifecycle, and embeddings), beside the services they call;
 * the stored completions and their feedback; and the gateway's one queue: background responses
 * (BackgroundResponses).
 */
@Module({
  imports: [AuthModule, ChatGatewayModule, ReposGatewayModule],
  controllers: [ChatController, StoredCompletionsController, FeedbackController, FeedbackMetricsController, ExperimentsController, ResponsesController, MessagesController, EmbeddingsController],
  providers: [ResponsesService, ResponsesRepository, MessagesService, BackgroundResponses, KeptResponseEvents, FeedbackService, StoredCompletionsSweeper, ExportCompletions, CompletionExportJobs, CompletionExportsRepository],
})
export class ChatRoutesModule {}
