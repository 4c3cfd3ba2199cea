import type { AnthropicMessage } from '@atelier/contracts';
import { toolInput } from '../tool-arguments';
import type { ChatCompletion, ChatCompletionChunk, ChatUsage } from '../chat-types';

type StopReason = AnthropicMessage['stop_reason'];
type Usage = AnthropicMessage['usage'];
type ContentBlock = AnthropicMessage['content'][number];

/** Chat's finish reasons as Anthropic's stop reasons. */
export function stopReason(finish: string | null | undefined): StopReason {
  switch (finish) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    case null:
    case undefined:
      return null;
    default:
      return 'end_turn';
  }
}

/**
 * Chat usage as Anthropic's, every field a number: Anthropic's input_tokens leave out what was
 * read from the cache, which chat reports inside prompt_tokens (prompt_tokens_details.cached_tokens).
 */
export function anthropicUsage(usage: (ChatUsage & { prompt_tokens_details?: { cached_tokens?: number } | null }) | undefined, fallbackInput = 0): Usage {
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? 0;
  const prompt = usage?.prompt_tokens ?? fallbackInput;
  return { input_tokens: Math.max(prompt - cached, 0), output_tokens: usage?.completion_tokens ?? 0, cache_creation_input_tokens: 0, cache_read_input_tokens: cached };
}

/** A whole chat completion as a Message. */
export function messageFromCompletion(completion: ChatCompletion, id: string, model: string): AnthropicMessage {
  const choice = completion.choices[0];
  const content: ContentBlock[] = [];
  const reasoning = (choice?.message as { reasoning_content?: unknown; reasoning?: unknown } | undefined)?.reasoning_content ?? (choice?.message as { reasoning?: unknown } | undefined)?.reasoning;
  if (typeof reasoning === 'string' && reasoning !== '') content.push({ type: 'thinking', thinking: reasoning, signature: '' });
  const text = choice?.message.content;
  if (typeof text === 'string' && text !== '') content.push({ type: 'text', text });
  for (const call of choice?.message.tool_calls ?? []) content.push({ type: 'tool_use', id: call.id, name: call.function.name, input: toolInput(call.function.arguments) });
  return { id, type: 'message', role: 'assistant', model, content, stop_reason: stopReason(choice?.finish_reason), stop_sequence: null, usage: anthropicUsage(completion.usage) };
}

export type MessageStreamEvent = { type: string } & Record<string, unknown>;

interface OpenBlock {
  index: number;
  kind: 'text' | 'thinking' | 'tool_use';
  /** The chat tool call's index, for a tool_use block. */
  call?: number;
}

/**
 * Chat completion chunks as the Messages stream, in Anthropic's order: message_start (with the
 * input usage already counted), then per block content_block_start, its deltas and
 * content_block_stop, each block its own increasing index (text, thinking and each tool call
 * never share one), then message_delta with the stop reason and the final usage, and
 * message_stop. A failure ends it with an error event instead, never a clean message_stop.
 */
export class MessageEventStream {
  private next = 0;
  private open: OpenBlock | undefined;
  private usage: ChatUsage | undefined;
  private finish: string | null = null;
  private started = false;
  private ended = false;
  private lastWrite = Date.now();
  private keepAlive: NodeJS.Timeout | undefined;

  constructor(
    private readonly id: string,
    private readonly model: string,
    private readonly write: (event: MessageStreamEvent) => void,
  ) {}

  private emit(event: MessageStreamEvent): void {
    this.lastWrite = Date.now();
    this.write(event);
  }

  /** Opens the stream: message_start with the prompt's count, then a ping; a ping after every `pingMs` of silence. */
  start(inputTokens: number, pingMs = 15_000): void {
    if (this.started) return;
    this.started = true;
    const usage: Usage = { input_tokens: inputTokens, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
    this.emit({ type: 'message_start', message: { id: this.id, type: 'message', role: 'assistant', model: this.model, content: [], stop_reason: null, stop_sequence: null, usage } });
    this.emit({ type: 'ping' });
    this.keepAlive = setInterval(() => {
      if (Date.now() - this.lastWrite >= pingMs) this.emit({ type: 'ping' });
    }, Math.max(50, Math.floor(pingMs / 3)));
    this.keepAlive.unref();
  }

  get isStarted(): boolean {
    return this.started;
  }

  /** One serialized chat.completion.chunk. */
  chunk(data: string): void {
    let chunk: ChatCompletionChunk;
    try {
      chunk = JSON.parse(data) as ChatCompletionChunk;
    } catch {
      return;
    }
    if (chunk.usage && typeof chunk.usage.completion_tokens === 'number') this.usage = chunk.usage;
    for (const choice of chunk.choices ?? []) {
      const delta = (choice.delta ?? {}) as ChatCompletionChunk['choices'][number]['delta'] & { reasoning_content?: unknown; reasoning?: unknown };
      const reasoning = delta.reasoning_content ?? delta.reasoning;
      if (typeof reasoning === 'string' && reasoning !== '') this.thinking(reasoning);
      if (typeof delta.content === 'string' && delta.content !== '') this.text(delta.content);
      for (const call of delta.tool_calls ?? []) this.toolCall(call);
      if (choice.finish_reason) this.finish = choice.finish_reason;
    }
  }

  private begin(kind: OpenBlock['kind'], block: Record<string, unknown>, call?: number): OpenBlock {
    this.close();
    this.open = { index: this.next++, kind, call };
    this.emit({ type: 'content_block_start', index: this.open.index, content_block: block });
    return this.open;
  }

  private thinking(delta: string): void {
    const open = this.open?.kind === 'thinking' ? this.open : this.begin('thinking', { type: 'thinking', thinking: '', signature: '' });
    this.emit({ type: 'content_block_delta', index: open.index, delta: { type: 'thinking_delta', thinking: delta } });
  }

  private text(delta: string): void {
    const open = this.open?.kind === 'text' ? this.open : this.begin('text', { type: 'text', text: '' });
    this.emit({ type: 'content_block_delta', index: open.index, delta: { type: 'text_delta', text: delta } });
  }

  private toolCall(call: NonNullable<ChatCompletionChunk['choices'][number]['delta']['tool_calls']>[number]): void {
    let open = this.open;
    if (open?.kind !== 'tool_use' || open.call !== call.index)
      open = this.begin('tool_use', { type: 'tool_use', id: call.id ?? `toolu_${this.id.slice(4)}_${call.index}`, name: call.function?.name ?? '', input: {} }, call.index);
    const args = call.function?.arguments ?? '';
    if (args !== '') this.emit({ type: 'content_block_delta', index: open.index, delta: { type: 'input_json_delta', partial_json: args } });
  }

  private close(): void {
    if (!this.open) return;
    this.emit({ type: 'content_block_stop', index: this.open.index });
    this.open = undefined;
  }

  /** The end: message_delta with the stop reason and the usage, then message_stop. */
  end(fallbackInput: number): void {
    if (this.ended) return;
    this.ended = true;
    this.close();
    clearInterval(this.keepAlive);
    this.emit({ type: 'message_delta', delta: { stop_reason: stopReason(this.finish) ?? 'end_turn', stop_sequence: null }, usage: anthropicUsage(this.usage, fallbackInput) });
    this.emit({ type: 'message_stop' });
  }

  /** A failure after the stream opened: an error event ends it (never message_stop). */
  fail(type: string, message: string): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.keepAlive);
    this.emit({ type: 'error', error: { type, message } });
  }

  /** Stops the keep-alive (the client went away). */
  dispose(): void {
    this.ended = true;
    clearInterval(this.keepAlive);
  }
}
