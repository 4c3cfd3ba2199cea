import type { ChatModelAdapter } from '@atelier/contracts';
import type { ChatModelDefinition } from '@atelier/models';
import type { ChatCompletion, ChatRequest, ChatUsage } from '../chat-types';

/** One chat request as the chat service hands it to the provider of the model's engine. */
export interface ChatProviderCall {
  model: ChatModelDefinition;
  request: ChatRequest;
  /** The validated body without atelier's own fields, for providers that forward it. */
  body: Record<string, unknown>;
  promptTokens: number;
  /** chatcmpl-... id and creation time the response carries, whoever produced it. */
  completionId: string;
  created: number;
  /** Aborted when the caller goes away or the job is cancelled: the provider must stop. */
  signal: AbortSignal;
  /** A deployed fine-tune's adapter, applied by the provider that serves it. */
  adapter?: ChatModelAdapter;
}

export interface ProviderCompletion {
  completion: ChatCompletion;
  /** Which engine or upstream answered (recorded with the usage). */
  provider: string;
}

export interface ProviderStream {
  usage: ChatUsage;
  provider: string;
}

/** Sends one serialized chat.completion.chunk to the caller. */
export type ChunkSink = (chunkJson: string) => Promise<void>;

/**
 * A chat engine. Streams must end with a chunk that carries `usage` (OpenAI's
 * include_usage form: empty choices), so every streamed call is billed exactly.
 */
export interface ChatProvider {
  complete(call: ChatProviderCall): Promise<ProviderCompletion>;
  stream(call: ChatProviderCall, emit: ChunkSink): Promise<ProviderStream>;
}

export function usageOf(promptTokens: number, completionTokens: number): ChatUsage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

export function usageChunk(call: Pick<ChatProviderCall, 'completionId' | 'created' | 'model'>, usage: ChatUsage): string {
  return JSON.stringify({ id: call.completionId, object: 'chat.completion.chunk', created: call.created, model: call.model.id, choices: [], usage });
}
