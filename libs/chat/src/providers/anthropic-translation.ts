import type { ChatCompletion, ChatCompletionChunk, ChatContentPart, ChatMessage, ChatRequest, ChatTool, ChatToolCall, ChatUsage, ToolChoice } from '../chat-types';
import { toolInput } from '../tool-arguments';

/**
 * Chat completions to Anthropic's Messages API and back, for an `anthropic` engine: the
 * direction the OpenAI SDK (chat completions and, through them, the Responses API) takes to a
 * Claude upstream. The other direction (Messages to chat) is libs/chat/src/messages.
 */

type Block = Record<string, unknown> & { type: string };
interface AnthropicMessage {
  role: 'user' | 'assistant' | 'system';
  content: Block[];
}

/** A chat image part as an Anthropic image block: a data URL becomes base64, anything else a url source. */
function imageBlock(url: string): Block {
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  return data ? { type: 'image', source: { type: 'base64', media_type: data[1], data: data[2] } } : { type: 'image', source: { type: 'url', url } };
}

function contentBlocks(content: ChatMessage['content']): Block[] {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  const blocks: Block[] = [];
  for (const part of content as ChatContentPart[]) {
    if (part.type === 'text') blocks.push({ type: 'text', text: part.text });
    else if (part.type === 'image_url' && part.image_url) blocks.push(imageBlock(part.image_url.url));
  }
  return blocks;
}

const textOf = (content: ChatMessage['content']): string =>
  contentBlocks(content)
    .filter((b) => b.type === 'text')
    .map((b) => b.text as string)
    .join('\n\n');

/**
 * The conversation in Anthropic's terms: leading system messages become `system`; later ones stay
 * system messages in place (the Messages API takes them mid-conversation); consecutive tool
 * messages become one user turn of tool_result blocks; an assistant's tool_calls become tool_use
 * blocks after its text.
 */
export function messagesOf(messages: ChatMessage[]): { system?: string; messages: AnthropicMessage[] } {
  let i = 0;
  const leading: string[] = [];
  while (i < messages.length && (messages[i].role === 'system' || messages[i].role === 'developer')) leading.push(textOf(messages[i++].content));
  const out: AnthropicMessage[] = [];
  const push = (role: AnthropicMessage['role'], blocks: Block[]) => {
    const last = out.at(-1);
    // Anthropic wants turns to alternate: a user turn after a user turn joins it.
    if (last && last.role === role && role === 'user') last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (; i < messages.length; i++) {
    const m = messages[i];
    if (m.role === 'system' || m.role === 'developer') out.push({ role: 'system', content: [{ type: 'text', text: textOf(m.content) }] });
    else if (m.role === 'tool') push('user', [{ type: 'tool_result', tool_use_id: m.tool_call_id, content: textOf(m.content) }]);
    else if (m.role === 'assistant') {
      const blocks = contentBlocks(m.content);
      for (const call of m.tool_calls ?? []) blocks.push({ type: 'tool_use', id: call.id, name: call.function.name, input: toolInput(call.function.arguments) });
      if (blocks.length > 0) out.push({ role: 'assistant', content: blocks });
    } else push('user', contentBlocks(m.content));
  }
  return { ...(leading.length > 0 && { system: leading.join('\n\n') }), messages: out };
}

function toolChoiceOf(choice: ToolChoice, parallel: boolean): Record<string, unknown> | undefined {
  const disable = parallel ? {} : { disable_parallel_tool_use: true };
  if (choice === 'none') return { type: 'none' };
  if (choice === 'auto') return { type: 'auto', ...disable };
  if (choice === 'required') return { type: 'any', ...disable };
  return { type: 'tool', name: choice.function.name, ...disable };
}

/** A validated chat request as a Messages request for `model` (the upstream's name). */
export function messagesRequestOf(request: ChatRequest, model: string, stream: boolean): Record<string, unknown> {
  const { system, messages } = messagesOf(request.messages);
  const tools = request.tools.map((t: ChatTool) => ({ name: t.function.name, ...(t.function.description && { description: t.function.description }), input_schema: t.function.parameters ?? { type: 'object', properties: {} } }));
  return {
    model,
    max_tokens: request.maxTokens,
    ...(system !== undefined && { system }),
    messages,
    ...(tools.length > 0 && { tools, tool_choice: toolChoiceOf(request.toolChoice, request.parallelToolCalls) }),
    // Anthropic's temperature runs 0-1, chat's 0-2.
    ...(request.temperature !== 1 && { temperature: Math.min(request.temperature, 1) }),
    ...(request.topP !== 1 && { top_p: request.topP }),
    ...(request.stop.length > 0 && { stop_sequences: request.stop }),
    ...(stream && { stream: true }),
  };
}

/** Anthropic's stop reasons as chat's finish reasons. */
export function finishReasonOf(stop: unknown): string {
  if (stop === 'max_tokens') return 'length';
  if (stop === 'tool_use') return 'tool_calls';
  if (stop === 'refusal') return 'content_filter';
  return 'stop';
}

interface AnthropicUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
}

/** Anthropic's usage as chat's: every input token the prompt took (cache reads and writes included) is a prompt token, as billed. */
export function chatUsageOf(usage: AnthropicUsage | undefined): (ChatUsage & { prompt_tokens_details: { cached_tokens: number } }) | undefined {
  if (!usage || typeof usage.input_tokens !== 'number' || typeof usage.output_tokens !== 'number') return undefined;
  const cached = usage.cache_read_input_tokens ?? 0;
  const prompt = usage.input_tokens + (usage.cache_creation_input_tokens ?? 0) + cached;
  return { prompt_tokens: prompt, completion_tokens: usage.output_tokens, total_tokens: prompt + usage.output_tokens, prompt_tokens_details: { cached_tokens: cached } };
}

/** A whole Message as a chat completion. */
export function completionOf(message: { content?: Block[]; stop_reason?: unknown; usage?: AnthropicUsage }, id: string, model: string, created: number): ChatCompletion {
  const blocks = message.content ?? [];
  const text = blocks.filter((b) => b.type === 'text').map((b) => b.text as string).join('');
  const thinking = blocks.filter((b) => b.type === 'thinking').map((b) => b.thinking as string).join('');
  const calls: ChatToolCall[] = blocks
    .filter((b) => b.type === 'tool_use')
    .map((b, index) => ({ id: b.id as string, index, type: 'function', function: { name: b.name as string, arguments: JSON.stringify(b.input ?? {}) } }));
  const usage = chatUsageOf(message.usage);
  return {
    id,
    object: 'chat.completion',
    created,
    model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: text === '' && calls.length > 0 ? null : text, ...(calls.length > 0 && { tool_calls: calls }), ...(thinking && { reasoning_content: thinking }) },
        finish_reason: finishReasonOf(message.stop_reason),
      },
    ],
    usage: usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  };
}

/**
 * The events of a Messages stream as chat.completion.chunks: text and thinking deltas as content
 * and reasoning_content, each tool_use block as one tool call (its index among the calls), its
 * input_json_delta as argument pieces; message_delta gives the finish reason, and the usage
 * (message_start's input, message_delta's output) comes in a last chunk of its own.
 */
export class ChunksFromMessages {
  private readonly toolIndex = new Map<number, number>();
  private usage: AnthropicUsage = {};
  private finish: string | null = null;
  ended = false;
  /** The answer's text so far (counted when the upstream reports no usage). */
  text = '';

  constructor(
    private readonly id: string,
    private readonly model: string,
    private readonly created: number,
  ) {}

  private chunk(delta: ChatCompletionChunk['choices'][number]['delta'] & Record<string, unknown>, finish: string | null = null): ChatCompletionChunk {
    return { id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [{ index: 0, delta, finish_reason: finish }] };
  }

  /** The chunks one event becomes (none for most). Throws on an `error` event. */
  event(event: Record<string, unknown> & { type?: string }): ChatCompletionChunk[] {
    switch (event.type) {
      case 'message_start': {
        const message = event.message as { usage?: AnthropicUsage } | undefined;
        this.usage = { ...this.usage, ...message?.usage };
        return [this.chunk({ role: 'assistant', content: '' })];
      }
      case 'content_block_start': {
        const block = event.content_block as Block;
        if (block?.type !== 'tool_use') return [];
        const index = this.toolIndex.size;
        this.toolIndex.set(event.index as number, index);
        return [this.chunk({ tool_calls: [{ index, id: block.id as string, type: 'function', function: { name: block.name as string, arguments: '' } }] })];
      }
      case 'content_block_delta': {
        const delta = event.delta as Block;
        if (delta.type === 'text_delta') {
          this.text += delta.text as string;
          return [this.chunk({ content: delta.text as string })];
        }
        if (delta.type === 'thinking_delta') return [this.chunk({ reasoning_content: delta.thinking as string })];
        if (delta.type === 'input_json_delta') {
          const index = this.toolIndex.get(event.index as number);
          return index === undefined ? [] : [this.chunk({ tool_calls: [{ index, function: { arguments: delta.partial_json as string } }] })];
        }
        return [];
      }
      case 'message_delta': {
        const delta = event.delta as { stop_reason?: unknown } | undefined;
        this.usage = { ...this.usage, ...(event.usage as AnthropicUsage | undefined) };
        this.finish = finishReasonOf(delta?.stop_reason);
        return [this.chunk({}, this.finish)];
      }
      case 'message_stop':
        this.ended = true;
        return [];
      case 'error': {
        const error = event.error as { message?: string } | undefined;
        throw new Error(error?.message ?? 'unknown error');
      }
      default:
        return [];
    }
  }

  /** The usage the stream reported, when it did. */
  get reportedUsage(): ChatUsage | undefined {
    return chatUsageOf(this.usage);
  }
}
