import type { JsonSchemaObject } from '@atelier/models';

/** The OpenAI chat wire format, as far as atelier reads or writes it. */

export type ChatRole = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

export interface ChatTextPart {
  type: 'text';
  text: string;
}

export interface ChatMediaPart {
  type: 'image_url' | 'video_url';
  image_url?: { url: string; detail?: string };
  video_url?: { url: string; detail?: string };
}

export interface ChatAudioPart {
  type: 'input_audio';
  input_audio: { data: string; format: string };
}

export type ChatContentPart = ChatTextPart | ChatMediaPart | ChatAudioPart;

export interface ChatToolCall {
  id: string;
  /** Position among the message's tool calls (the spec lists it on every item). */
  index?: number;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: ChatRole;
  content?: string | ChatContentPart[] | null;
  name?: string;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
}

export interface ChatTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: JsonSchemaObject; strict?: boolean | null };
}

export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: { name: string; description?: string; schema?: JsonSchemaObject; strict?: boolean | null } };

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter';

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: {
    index: number;
    message: { role: 'assistant'; content: string | null; tool_calls?: ChatToolCall[]; refusal?: string | null };
    finish_reason: FinishReason | string | null;
    logprobs?: unknown;
  }[];
  usage: ChatUsage;
  [extra: string]: unknown;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: {
    index: number;
    delta: {
      role?: 'assistant';
      content?: string | null;
      tool_calls?: { index: number; id?: string; type?: 'function'; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason: FinishReason | string | null;
    logprobs?: unknown;
  }[];
  usage?: ChatUsage | null;
  [extra: string]: unknown;
}

/**
 * A chat request after validation against the model's schema and the checks of
 * normalizeChatRequest: every option resolved to the value the engine should use.
 */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream: boolean;
  /** max_completion_tokens, else max_tokens, else the model default (bounded by the context window). */
  maxTokens: number;
  /** Whether the caller set the limit (false: the model default applied). */
  maxTokensExplicit: boolean;
  temperature: number;
  topP: number;
  frequencyPenalty: number;
  presencePenalty: number;
  stop: string[];
  seed?: number;
  tools: ChatTool[];
  toolChoice: ToolChoice;
  parallelToolCalls: boolean;
  responseFormat: ResponseFormat;
}
