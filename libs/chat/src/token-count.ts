import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import type { ChatMessage, ChatTool, ChatToolCall } from './chat-types';

/**
 * Token counts with OpenAI's o200k BPE (gpt-tokenizer). Message framing follows OpenAI's
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

/**
 * gpt-tokenizer's BPE is quadratic in the length of one pre-tokenized piece, and a run without
 * whitespace (or of whitespace only, or CJK text, which has no spaces) is one piece: 64 KiB of
 * "A" took 2 s, 64 KiB of CJK 19 s, all of it blocking the event loop. Runs longer than this are
 * counted in slices of it, which keeps the count linear in the input. Ordinary text has no such
 * runs and is counted exactly; a long run's count may differ by about one token per slice, well
 * inside what a reservation estimate allows.
 */
export const MAX_RUN_CHARS = 128;
const LONG_RUN = /\S{129,}|\s{129,}/g;

export function countTextTokens(text: string): number {
  return countInSlices(text, countTokens);
}

/** Any BPE counter made linear: long runs are counted in slices of MAX_RUN_CHARS (also used for fine-tune datasets). */
export function countInSlices(text: string, count: (piece: string) => number): number {
  if (text.length <= MAX_RUN_CHARS) return text.length === 0 ? 0 : count(text);
  let total = 0;
  let last = 0;
  for (const match of text.matchAll(LONG_RUN)) {
    if (match.index > last) total += count(text.slice(last, match.index));
    for (let start = 0, run = match[0]; start < run.length; ) {
      let end = Math.min(start + MAX_RUN_CHARS, run.length);
      // Never cut a surrogate pair: half an emoji would count as an unknown byte sequence.
      const code = run.charCodeAt(end - 1);
      if (end < run.length && code >= 0xd800 && code <= 0xdbff) end--;
      total += count(run.slice(start, end));
      start = end;
    }
    last = match.index + match[0].length;
  }
  if (last < text.length) total += count(last === 0 ? text : text.slice(last));
  return total;
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
