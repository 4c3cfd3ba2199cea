import type { ChatCompletion, ChatCompletionChunk, ChatUsage } from '../chat-types';
import { itemId, type ResponseItem, type ToolOrigin } from './responses-request';

/** A Response object (OpenAI's shape), built here and stored as it was answered. */
export type ResponseObject = Record<string, unknown> & { id: string; output: ResponseItem[]; status: string };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Everything a Response carries besides its output, echoed from the request as OpenAI does:
 * the same object opens a stream (response.created) and becomes the final answer.
 */
export function responseShell(id: string, body: Record<string, unknown>, store: boolean): ResponseObject {
  const reasoning = isObject(body.reasoning) ? body.reasoning : {};
  return {
    id,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'in_progress',
    background: false,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: body.model,
    output: [],
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: reasoning.effort ?? null, summary: reasoning.summary ?? null },
    store,
    temperature: body.temperature ?? 1,
    text: isObject(body.text) ? { format: { type: 'text' }, ...body.text } : { format: { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: Array.isArray(body.tools) ? body.tools : [],
    top_p: body.top_p ?? 1,
    truncation: body.truncation ?? 'disabled',
    usage: null,
    user: body.user ?? null,
    metadata: isObject(body.metadata) ? body.metadata : {},
  };
}

export function responseUsage(usage: ChatUsage): Record<string, unknown> {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.total_tokens,
  };
}

function messageItem(id: string, text: string, status: string, refusal?: string): ResponseItem {
  const content = refusal !== undefined ? [{ type: 'refusal', refusal }] : [{ type: 'output_text', text, annotations: [], logprobs: [] }];
  return { type: 'message', id, status, role: 'assistant', content };
}

/** The item a chat tool call comes back as: the declared tool's own kind, namespace and name. */
function callItem(origins: Map<string, ToolOrigin>, id: string, callId: string, chatName: string, args: string, status: string): ResponseItem {
  const origin = origins.get(chatName) ?? { kind: 'function', name: chatName };
  if (origin.kind === 'custom') {
    let input = args;
    try {
      const parsed = JSON.parse(args) as unknown;
      if (isObject(parsed) && typeof parsed.input === 'string') input = parsed.input;
    } catch {
      // an upstream that did not produce the one-argument object: its raw arguments are the input
    }
    return { type: 'custom_tool_call', id: id.replace(/^fc_/, 'ctc_'), status, call_id: callId, name: origin.name, input };
  }
  return { type: 'function_call', id, status, call_id: callId, name: origin.name, arguments: args, ...(origin.namespace && { namespace: origin.namespace }) };
}

/** output_text: the SDK's convenience, the concatenated text of the output's messages. */
export function outputText(output: readonly ResponseItem[]): string {
  return output
    .filter((item) => item.type === 'message')
    .flatMap((item) => item.content as { type: string; text?: string }[])
    .filter((part) => part.type === 'output_text')
    .map((part) => part.text ?? '')
    .join('');
}

/** Sets the final status, output and usage; finish_reason says whether the answer is complete. */
export function finishResponse(shell: ResponseObject, output: ResponseItem[], usage: ChatUsage, finishReason: string | null | undefined): ResponseObject {
  const incomplete = finishReason === 'length' ? 'max_output_tokens' : finishReason === 'content_filter' ? 'content_filter' : null;
  return {
    ...shell,
    status: incomplete ? 'incomplete' : 'completed',
    incomplete_details: incomplete ? { reason: incomplete } : null,
    output,
    output_text: outputText(output),
    usage: responseUsage(usage),
  };
}

/** A chat.completion's choice as Response output items. */
export function completionOutput(completion: ChatCompletion, origins: Map<string, ToolOrigin>): { output: ResponseItem[]; finishReason: string | null } {
  const choice = completion.choices[0];
  const output: ResponseItem[] = [];
  const message = choice?.message;
  if (message && typeof message.refusal === 'string' && message.refusal) output.push(messageItem(itemId('msg'), '', 'completed', message.refusal));
  else if (message && typeof message.content === 'string' && message.content !== '') output.push(messageItem(itemId('msg'), message.content, 'completed'));
  for (const call of message?.tool_calls ?? []) output.push(callItem(origins, itemId('fc'), call.id, call.function.name, call.function.arguments, 'completed'));
  return { output, finishReason: choice?.finish_reason ?? null };
}

/** An event of a Responses stream, before its sequence number. */
export type ResponseEvent = Record<string, unknown> & { type: string };

interface OpenItem {
  index: number;
  item: ResponseItem;
  /** The chat tool call's index, for a call item. */
  callIndex?: number;
  text: string;
}

/**
 * Turns a chat completion stream into the Responses stream's events, in the order the official
 * SDK's accumulator checks: created and in_progress; per item added, its deltas and done; then
 * completed (or incomplete) with the whole output and usage. Items are emitted one after the
 * other, as OpenAI does: a new item closes the one before it.
 */
export class ResponseEventStream {
  private sequence = 0;
  private readonly output: ResponseItem[] = [];
  private open: OpenItem | undefined;
  private usage: ChatUsage | undefined;
  private finishReason: string | null = null;

  constructor(
    private readonly shell: ResponseObject,
    private readonly origins: Map<string, ToolOrigin>,
    private readonly write: (event: ResponseEvent & { sequence_number: number }) => void,
  ) {}

  private emit(event: ResponseEvent): void {
    this.write({ ...event, sequence_number: this.sequence++ });
  }

  start(): void {
    this.emit({ type: 'response.created', response: this.shell });
    this.emit({ type: 'response.in_progress', response: this.shell });
  }

  /** An event made elsewhere (an upstream that speaks the Responses API), in this stream's numbering. */
  forward(event: ResponseEvent): void {
    this.emit(event);
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
      if (choice.finish_reason) this.finishReason = choice.finish_reason;
      const delta = choice.delta ?? {};
      if (typeof delta.content === 'string' && delta.content !== '') this.text(delta.content);
      for (const call of delta.tool_calls ?? []) this.toolCall(call);
    }
  }

  private text(delta: string): void {
    if (this.open?.item.type !== 'message') {
      this.close();
      const item = messageItem(itemId('msg'), '', 'in_progress');
      this.open = { index: this.output.length, item: { ...item, content: [] }, text: '' };
      this.output.push(this.open.item);
      this.emit({ type: 'response.output_item.added', output_index: this.open.index, item: this.open.item });
      this.emit({ type: 'response.content_part.added', item_id: item.id, output_index: this.open.index, content_index: 0, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } });
    }
    const open = this.open as OpenItem;
    open.text += delta;
    this.emit({ type: 'response.output_text.delta', item_id: open.item.id, output_index: open.index, content_index: 0, delta, logprobs: [] });
  }

  private toolCall(call: NonNullable<ChatCompletionChunk['choices'][number]['delta']['tool_calls']>[number]): void {
    if (this.open?.callIndex !== call.index) {
      this.close();
      const name = call.function?.name ?? '';
      const item = callItem(this.origins, itemId('fc'), call.id ?? itemId('call'), name, '', 'in_progress');
      this.open = { index: this.output.length, item, callIndex: call.index, text: '' };
      this.output.push(item);
      this.emit({ type: 'response.output_item.added', output_index: this.open.index, item });
    }
    const open = this.open as OpenItem;
    const args = call.function?.arguments ?? '';
    if (args === '') return;
    open.text += args;
    // A custom tool's input is one string inside the chat arguments: it is sent whole when the call is done.
    if (open.item.type === 'function_call') this.emit({ type: 'response.function_call_arguments.delta', item_id: open.item.id, output_index: open.index, delta: args });
  }

  /** Ends the open item: `completed`, or `incomplete` when the stream broke off inside it. */
  private close(status: 'completed' | 'incomplete' = 'completed'): void {
    const open = this.open;
    if (!open) return;
    this.open = undefined;
    let done: ResponseItem;
    if (open.item.type === 'message') {
      done = messageItem(open.item.id as string, open.text, status);
      const part = (done.content as unknown[])[0];
      this.emit({ type: 'response.output_text.done', item_id: done.id, output_index: open.index, content_index: 0, text: open.text, logprobs: [] });
      this.emit({ type: 'response.content_part.done', item_id: done.id, output_index: open.index, content_index: 0, part });
    } else {
      const chatName = this.chatName(open.item);
      done = callItem(this.origins, (open.item.id as string).replace(/^ctc_/, 'fc_'), open.item.call_id as string, chatName, open.text, status);
      if (done.type === 'function_call')
        this.emit({ type: 'response.function_call_arguments.done', item_id: done.id, output_index: open.index, name: done.name, arguments: open.text });
      else {
        this.emit({ type: 'response.custom_tool_call_input.delta', item_id: done.id, output_index: open.index, delta: done.input });
        this.emit({ type: 'response.custom_tool_call_input.done', item_id: done.id, output_index: open.index, input: done.input });
      }
    }
    this.output[open.index] = done;
    this.emit({ type: 'response.output_item.done', output_index: open.index, item: done });
  }

  private chatName(item: ResponseItem): string {
    for (const [chatName, origin] of this.origins) if (origin.name === item.name && (origin.namespace ?? undefined) === (item.namespace ?? undefined)) return chatName;
    return item.name as string;
  }

  /** Closes the open item; the final Response, to store before it is announced. */
  finish(): ResponseObject {
    this.close();
    const usage = this.usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    return finishResponse(this.shell, this.output, usage, this.finishReason);
  }

  complete(response: ResponseObject): void {
    this.emit({ type: response.status === 'incomplete' ? 'response.incomplete' : 'response.completed', response });
  }

  /** The stream broke off: response.failed with what was produced, never a clean end. */
  fail(error: { type: string; message: string }): void {
    this.close('incomplete');
    this.emit({
      type: 'response.failed',
      response: { ...this.shell, status: 'failed', error: { code: error.type, message: error.message }, output: this.output, output_text: outputText(this.output) },
    });
  }
}
