import { ChatStoreFields } from '@atelier/contracts';
import type { Caller } from '@atelier/auth';
import { invalid, OPENAI_CHAT_FIELDS } from '../chat-request';
import type { ChatUsage } from '../chat-types';
import { ChunksFromMessages, completionOf } from '../providers/anthropic-translation';

/** Whether a chat completion is kept, and with what metadata (undefined: not kept). */
export interface StoreDecision {
  metadata: Record<string, string>;
}

/**
 * store: false, or a key that refuses storing, always wins; store: true (or storeByDefault: an
 * experiment with a metric, whose feedback needs the answers) keeps it; otherwise the
 * namespace's capture_rate samples it (for requests billed to the key's own namespace, whose
 * rate the key's reading carries). A malformed store or metadata is a 400 whether or not the
 * answer would be kept. `random` gives the sample's draw in [0, 1).
 */
export function storeDecision(
  caller: Caller,
  billedTo: string,
  raw: Record<string, unknown>,
  options: { random?: () => number; storeByDefault?: boolean } = {},
): StoreDecision | undefined {
  const random = options.random ?? Math.random;
  // The common request names neither: nothing to parse.
  if (raw.store === undefined && raw.metadata === undefined) {
    if (caller.storeRefused) return undefined;
    if (options.storeByDefault) return { metadata: {} };
    if (caller.captureRate === undefined || billedTo !== caller.namespaceId) return undefined;
    return random() < caller.captureRate ? { metadata: {} } : undefined;
  }
  const parsed = ChatStoreFields.safeParse({ store: raw.store, metadata: raw.metadata });
  if (!parsed.success) throw invalid(parsed.error.issues.map((i) => ({ field: i.path.join('.') || 'metadata', message: i.message })));
  const { store, metadata } = parsed.data;
  if (store === false || caller.storeRefused) return undefined;
  if (store === true || options.storeByDefault) return { metadata: metadata ?? {} };
  if (caller.captureRate === undefined || billedTo !== caller.namespaceId) return undefined;
  return random() < caller.captureRate ? { metadata: metadata ?? {} } : undefined;
}

/** The request's messages as GET .../messages lists them: each with an id (`<completion id>-<index>`). */
export function storedMessages(completionId: string, messages: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  return messages.map((m, i) => ({ id: `${completionId}-${i}`, ...m }));
}

/** The request's other OpenAI parameters (temperature, tools, ...): what a dataset needs besides the messages. */
export function storedRequest(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([k]) => OPENAI_CHAT_FIELDS.has(k) && k !== 'messages' && k !== 'model' && k !== 'stream' && k !== 'stream_options'));
}

interface Chunk {
  id?: string;
  created?: number;
  model?: string;
  system_fingerprint?: string | null;
  service_tier?: string | null;
  usage?: ChatUsage | null;
  choices?: {
    index?: number;
    delta?: { role?: string; content?: string | null; refusal?: string | null; tool_calls?: { index: number; id?: string; type?: string; function?: { name?: string; arguments?: string } }[] };
    finish_reason?: string | null;
    logprobs?: unknown;
  }[];
}

/**
 * A streamed answer put back together as the chat.completion object a non-streamed request
 * would have answered: content, refusal and tool calls joined in order, the last finish_reason,
 * and the usage the request was charged for.
 */
export function assembleStreamedCompletion(chunks: readonly string[], usage: ChatUsage, fallback: { id: string; model: string }): Record<string, unknown> {
  let id = fallback.id;
  let model = fallback.model;
  let created = Math.floor(Date.now() / 1000);
  let fingerprint: string | null | undefined;
  let content: string | null = null;
  let refusal: string | null = null;
  let finishReason: string | null = null;
  const calls: { id: string; type: 'function'; function: { name: string; arguments: string } }[] = [];
  let first = true;
  for (const raw of chunks) {
    let chunk: Chunk;
    try {
      chunk = JSON.parse(raw) as Chunk;
    } catch {
      continue;
    }
    if (first && chunk.id) {
      id = chunk.id;
      if (chunk.model) model = chunk.model;
      if (typeof chunk.created === 'number') created = chunk.created;
      first = false;
    }
    if (chunk.system_fingerprint !== undefined) fingerprint = chunk.system_fingerprint;
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta ?? {};
      if (typeof delta.content === 'string') content = (content ?? '') + delta.content;
      if (typeof delta.refusal === 'string') refusal = (refusal ?? '') + delta.refusal;
      for (const tc of delta.tool_calls ?? []) {
        const slot = (calls[tc.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (tc.id) slot.id = tc.id;
        slot.function.name += tc.function?.name ?? '';
        slot.function.arguments += tc.function?.arguments ?? '';
      }
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }
  }
  const toolCalls = calls.filter(Boolean);
  return {
    id,
    object: 'chat.completion',
    created,
    model,
    ...(fingerprint !== undefined && { system_fingerprint: fingerprint }),
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content, refusal, ...(toolCalls.length > 0 && { tool_calls: toolCalls }) },
        logprobs: null,
        finish_reason: finishReason,
      },
    ],
    usage,
  };
}

/**
 * A native Anthropic answer (a Message, or a stream's events) as the chat.completion it stands for,
 * with the Message's id (else the fallback's): how Messages traffic is kept beside chat's.
 */
export function completionFromMessages(
  message: Record<string, unknown> | null,
  events: readonly string[],
  usage: ChatUsage,
  fallback: { id: string; model: string },
): { id: string; completion: Record<string, unknown> } {
  const created = Math.floor(Date.now() / 1000);
  if (message) {
    const id = typeof message.id === 'string' ? message.id : fallback.id;
    return { id, completion: { ...completionOf(message as Parameters<typeof completionOf>[0], id, fallback.model, created), usage } };
  }
  let id = fallback.id;
  const chunks: string[] = [];
  const converter = new ChunksFromMessages(id, fallback.model, created);
  for (const raw of events) {
    try {
      const event = JSON.parse(raw) as Record<string, unknown> & { type?: string; message?: { id?: unknown } };
      if (event.type === 'message_start' && typeof event.message?.id === 'string') id = event.message.id;
      if (event.type === 'error') break;
      for (const chunk of converter.event(event)) chunks.push(JSON.stringify(chunk));
    } catch {
      // not an event we can read; nothing to keep of it
    }
  }
  return { id, completion: { ...assembleStreamedCompletion(chunks, usage, fallback), id } };
}
