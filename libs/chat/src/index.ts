export type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatContentPart,
  ChatMessage,
  ChatRequest,
  ChatRole,
  ChatTool,
  ChatToolCall,
  ChatUsage,
  FinishReason,
  ResponseFormat,
  ToolChoice,
} from './chat-types';
export { chatRequestFrom, parseChatRequest, resolveChatModel, providerBody, type ParsedChatRequest } from './chat-request';
export { countPromptTokens, countTextTokens } from './token-count';
export { tokenCost } from './chat-pricing';
export { generateLocalChat, type LocalChatOutput, type MediaDescription } from './local-chat/local-chat-generator';
export { LocalChatProvider, PROVIDER_LOCAL_CHAT, type MediaInspector } from './local-chat/local-chat.provider';
export { ChatMediaInspector } from './local-chat/chat-media-inspector';
export { CORPUS_TITLE } from './local-chat/corpus';
export { OpenAiCompatibleProvider, type SecretLookup } from './providers/openai-compatible.provider';
export type { ChatProvider, ChatProviderCall, ChunkSink, ProviderCompletion, ProviderStream } from './providers/chat-provider';
export { ChatCompletionRunner, type ChatRunContext } from './chat-completion.runner';
export { ChatCompletionProcessor } from './chat-completion.processor';
export { ChatCompletionsService, type ChatDelivery, type ChatOptions } from './chat-completions.service';
export { ChatGatewayModule } from './chat-gateway.module';
export { ChatServiceModule } from './chat-service.module';
export { ChatRoutesModule } from './chat-routes.module';
export { parseEmbeddingsRequest, type EmbeddingsRequest } from './embeddings/embeddings-request';
export { base64ToVector } from './embeddings/embedding-vectors';
export { translateResponsesRequest } from './responses/responses-request';
export { completionOutput, finishResponse, responseShell } from './responses/response-output';
export { StoredCompletionsSweeper } from './stored-completions/stored-completions-sweeper.service';
export { adaptiveWeights } from './experiments/experiment-weights';
