import { countInSlices, o200k } from '@atelier/bpe';
import type { ChatMessage, ChatTool, ChatToolCall } from './chat-types';

// Built when this module loads, so the first request does not pay for it.
const tokenizer = o200k();
const countTokens = (piece: string) => tokenizer.count(piece);

/**
 * Token counts with OpenAI's o200k BPE (@atelier/bpe's compact copy of it; special-token text counts
 * as plain text, as OpenAI counts message content). Message framing follows OpenAI's
 * published accounting for chat models: 3 tokens per message, 1 more for a name, 3 to prime
 * the reply. Media parts are not downloaded by the gateway, so each counts a fixed amount
 * (OpenAI's base cost of a low-detail image), which keeps the reservation an upper bound
 * computable before any fetch.
 */
export const TOKENS_PER_MESSAGE = 3;
export const TOKENS_PER_NAME = 1;
export const TOKENS_REPLY_PRIMING = 3;
export const TOKENS_PER_IMAGE = 85;
export const TOKENS_PER_VIDEO = 255;
export const TOKENS_PER_AUDIO = 255;

export function countTextTokens(text: string): number {
  return countInSlices(text, countTokens);
}

function contentTokens(content: ChatMessage['content']): number {
  if (content === undefined || content === null) return 0;
  if (typeof content === 'string') return countTextTokens(content);
  let total = 0;
  for (const part of content) {
    if (part.type === 'text') total += countTextTokens(part.text);
    else if (part.type === 'image_url') total += TOKENS_PER_IMAGE;
    else if (part.type === 'video_url') total += TOKENS_PER_VIDEO;
    else total += TOKENS_PER_AUDIO;
  }
  return total;
}

export function toolCallTokens(calls: readonly ChatToolCall[]): number {
  let total = 0;
  for (const call of calls) total += countTextTokens(call.function.name) + countTextTokens(call.function.arguments) + TOKENS_PER_MESSAGE;
  return total;
}

export function countPromptTokens(messages: readonly ChatMessage[], tools: readonly ChatTool[] = []): number {
  let total = TOKENS_REPLY_PRIMING;
  for (const message of messages) {
    total += TOKENS_PER_MESSAGE + countTextTokens(message.role) + contentTokens(message.content);
    if (message.name) total += TOKENS_PER_NAME + countTextTokens(message.name);
    if (message.tool_calls) total += toolCallTokens(message.tool_calls);
    if (message.tool_call_id) total += countTextTokens(message.tool_call_id);
  }
  // Tool definitions reach the model as text; their JSON is a close, slightly generous estimate.
  if (tools.length > 0) total += countTextTokens(JSON.stringify(tools));
  return total;
}
