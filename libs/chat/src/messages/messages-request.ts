import { AnthropicCountTokensRequest, AnthropicMessagesRequest, ApiError, type AnthropicContentBlock, type AnthropicMessageParam, type AnthropicTool } from '@atelier/contracts';
import type { ChatModelDefinition } from '@atelier/models';
import type { ZodType } from 'zod';
import type { ChatContentPart, ChatMessage, ChatTool, ChatToolCall, ToolChoice } from '../chat-types';

/** A 400 naming its field, in the envelope's `fields` (Anthropic's envelope carries the message). */
export const fieldError = (field: string, message: string) => ApiError.badRequest(message, { fields: [{ field, message }] });

/** Validates against a contract schema; every issue as `<field>: <message>`, the way Anthropic names them. */
function parse<S extends ZodType>(schema: S, body: unknown): ReturnType<S['parse']> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('Request body must be a JSON object');
  const result = schema.safeParse(body);
  if (result.success) return result.data as ReturnType<S['parse']>;
  const fields = result.error.issues.map(deepest).map((issue) => {
    const field = issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`)).join('');
    const message = issue.message.startsWith(`${field}:`) || issue.message.startsWith(`${field} `) || field === '' ? issue.message : `${field}: ${issue.message}`;
    return { field, message };
  });
  throw ApiError.badRequest(fields.map((f) => f.message).join('; '), { fields });
}

type Issue = { path: PropertyKey[]; message: string; code?: string; errors?: Issue[][] };

/**
 * A union's refusal as the alternative that got furthest: `content: [{type: "video"}]` is
 * refused at `messages[0].content[0].type`, not as "not a string or an array" at `content`.
 */
function deepest(issue: Issue): Issue {
  if (issue.code !== 'invalid_union' || !issue.errors?.length) return issue;
  let best: Issue | undefined;
  for (const branch of issue.errors)
    for (const inner of branch) {
      const candidate = deepest({ ...inner, path: [...issue.path, ...inner.path] });
      if (!best || candidate.path.length >= best.path.length) best = candidate;
    }
  return best && best.path.length > issue.path.length ? best : issue;
}

export interface MessagesTranslation {
  /** The chat completions body that carries the request. */
  chatBody: Record<string, unknown>;
  /** The model name the caller used (an id or an alias); the answer names it. */
  model: string;
  stream: boolean;
  /** Anthropic-run tools (web search, code execution...) a chat upstream cannot run: left out, named in a header. */
  droppedTools: string[];
}

/** Efforts as OpenAI's reasoning_effort names them. */
const EFFORT: Record<string, string> = { low: 'low', medium: 'medium', high: 'high', max: 'high' };

/** The text of a system prompt given as a string or as text blocks (cache_control has no chat counterpart). */
function systemText(system: string | { text: string }[] | undefined): string | undefined {
  if (system === undefined) return undefined;
  const text = typeof system === 'string' ? system : system.map((b) => b.text).join('\n\n');
  return text === '' ? undefined : text;
}

function imagePart(block: Extract<AnthropicContentBlock, { type: 'image' }>): ChatContentPart {
  const source = block.source as { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string };
  const url = source.type === 'base64' ? `data:${source.media_type};base64,${source.data}` : source.url;
  return { type: 'image_url', image_url: { url } };
}

/** A tool_result's content as the text of a chat tool message (images in it go to the user message after). */
function toolResultContent(block: Extract<AnthropicContentBlock, { type: 'tool_result' }>, images: ChatContentPart[]): string {
  const content = block.content;
  let text: string;
  if (content === undefined) text = '';
  else if (typeof content === 'string') text = content;
  else {
    const parts: string[] = [];
    for (const inner of content) {
      if (inner.type === 'text') parts.push((inner as { text: string }).text);
      else if (inner.type === 'image') images.push(imagePart(inner as Extract<AnthropicContentBlock, { type: 'image' }>));
    }
    text = parts.join('\n');
  }
  return block.is_error ? `Error: ${text}` : text;
}

/** Text carried by blocks of Anthropic's own tools and documents, as far as a chat model can read them. */
function otherBlockText(block: Record<string, unknown>): string | undefined {
  if (block.type === 'document') {
    const source = block.source as { type?: string; data?: unknown } | undefined;
    if (source?.type === 'text' && typeof source.data === 'string') return source.data;
  }
  if (block.type === 'search_result' && Array.isArray(block.content))
    return (block.content as { text?: unknown }[]).map((c) => (typeof c.text === 'string' ? c.text : '')).join('\n');
  return undefined;
}

/**
 * The conversation as chat messages, in order: a user turn's tool_result blocks become tool
 * messages first (chat wants them right after the assistant's calls), each once; its text and
 * images one user message after them. An assistant turn's text and tool_use blocks become one
 * message with tool_calls; its thinking has no chat counterpart and is left out. A system turn
 * in the middle keeps its place. A tool_result must answer a tool_use of the assistant turn
 * just before it.
 */
function chatMessages(messages: AnthropicMessageParam[], system: string | undefined): ChatMessage[] {
  const out: ChatMessage[] = system === undefined ? [] : [{ role: 'system', content: system }];
  let open = new Set<string>();
  messages.forEach((message, i) => {
    const blocks: AnthropicContentBlock[] = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
    if (message.role === 'system') {
      const text = blocks.map((b) => (b.type === 'text' ? (b as { text: string }).text : '')).join('\n\n');
      out.push({ role: 'system', content: text });
      open = new Set();
      return;
    }
    if (message.role === 'assistant') {
      const text: string[] = [];
      const calls: ChatToolCall[] = [];
      blocks.forEach((block, j) => {
        if (block.type === 'text') text.push((block as { text: string }).text);
        else if (block.type === 'tool_use') {
          const use = block as Extract<AnthropicContentBlock, { type: 'tool_use' }>;
          if (calls.some((c) => c.id === use.id)) throw fieldError(`messages[${i}].content[${j}].id`, `messages[${i}].content[${j}].id: tool_use id '${use.id}' is used twice`);
          calls.push({ id: use.id, type: 'function', function: { name: use.name, arguments: JSON.stringify(use.input) } });
        } else if (block.type === 'image' || block.type === 'tool_result')
          throw fieldError(`messages[${i}].content[${j}].type`, `messages[${i}].content[${j}]: an assistant message cannot hold ${block.type} blocks`);
        else {
          const carried = otherBlockText(block as Record<string, unknown>);
          if (carried) text.push(carried);
        }
      });
      open = new Set(calls.map((c) => c.id));
      const content = text.join('');
      // Only thinking: nothing a chat model can be shown.
      if (content === '' && calls.length === 0) return;
      out.push({ role: 'assistant', content: content === '' ? null : content, ...(calls.length > 0 && { tool_calls: calls }) });
      return;
    }
    const parts: ChatContentPart[] = [];
    const images: ChatContentPart[] = [];
    const answered = new Set<string>();
    blocks.forEach((block, j) => {
      if (block.type === 'tool_result') {
        const result = block as Extract<AnthropicContentBlock, { type: 'tool_result' }>;
        const at = `messages[${i}].content[${j}].tool_use_id`;
        if (!open.has(result.tool_use_id))
          throw fieldError(at, `${at}: tool_result block '${result.tool_use_id}' does not answer a tool_use block of the assistant message just before it`);
        if (answered.has(result.tool_use_id)) throw fieldError(at, `${at}: tool_use '${result.tool_use_id}' is answered twice`);
        answered.add(result.tool_use_id);
        out.push({ role: 'tool', tool_call_id: result.tool_use_id, content: toolResultContent(result, images) });
      } else if (block.type === 'text') parts.push({ type: 'text', text: (block as { text: string }).text });
      else if (block.type === 'image') parts.push(imagePart(block as Extract<AnthropicContentBlock, { type: 'image' }>));
      else if (block.type === 'tool_use') throw fieldError(`messages[${i}].content[${j}].type`, `messages[${i}].content[${j}]: a user message cannot hold tool_use blocks`);
      else {
        const carried = otherBlockText(block as Record<string, unknown>);
        if (carried) parts.push({ type: 'text', text: carried });
      }
    });
    open = new Set();
    parts.push(...images);
    if (parts.length === 0) return;
    const onlyText = parts.every((p) => p.type === 'text');
    out.push({ role: 'user', content: onlyText ? parts.map((p) => (p as { text: string }).text).join('\n\n') : parts });
  });
  return out;
}

function chatTools(tools: AnthropicTool[] | undefined, dropped: string[]): ChatTool[] {
  const out: ChatTool[] = [];
  for (const tool of tools ?? []) {
    // Anthropic-run tools carry a versioned type; a chat upstream cannot run them.
    if (tool.type && tool.type !== 'custom') {
      dropped.push(tool.type);
      continue;
    }
    out.push({
      type: 'function',
      function: {
        name: tool.name,
        ...(tool.description !== undefined && { description: tool.description }),
        parameters: (tool.input_schema as ChatTool['function']['parameters']) ?? { type: 'object', properties: {} },
      },
    });
  }
  return out;
}

function chatToolChoice(choice: AnthropicMessagesRequest['tool_choice'], tools: ChatTool[]): { tool_choice?: ToolChoice; parallel_tool_calls?: boolean } {
  if (!choice || tools.length === 0) return {};
  const parallel = 'disable_parallel_tool_use' in choice && choice.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {};
  switch (choice.type) {
    case 'auto':
      return { tool_choice: 'auto', ...parallel };
    case 'any':
      return { tool_choice: 'required', ...parallel };
    case 'none':
      return { tool_choice: 'none' };
    case 'tool': {
      const name = (choice as { name: string }).name;
      if (!tools.some((t) => t.function.name === name)) throw fieldError('tool_choice.name', `tool_choice.name: '${name}' is not one of the declared tools`);
      return { tool_choice: { type: 'function', function: { name } }, ...parallel };
    }
  }
}

/** What the translation needs of the model a request names. */
export interface MessagesTarget {
  /** The name the chat request carries: a catalog model's id, or a deployed fine-tune's name. */
  id: string;
  /** The largest max_tokens the model's own schema allows (local models bound it below a Claude model's 32,000). */
  maxTokens?: number;
  /** The model takes OpenAI's reasoning_effort. */
  reasoning: boolean;
}

/** The target of a catalog chat model; a name the catalog lacks may be a deployed fine-tune (chat resolves it). */
export function messagesTarget(model: ChatModelDefinition | undefined, name: string): MessagesTarget {
  if (!model) return { id: name, reasoning: false };
  const max = (model.parameters.properties?.max_tokens as { maximum?: unknown } | undefined)?.maximum;
  return { id: model.id, maxTokens: typeof max === 'number' ? max : undefined, reasoning: model.parameters.properties?.reasoning_effort !== undefined };
}

/**
 * A Messages request as a chat completions body for `model`. max_tokens is a ceiling, as in
 * Anthropic's API: bounded by the model's own maximum here and by the context window when the
 * prompt is counted (Claude Code asks 32,000 of any model). Thinking becomes reasoning_effort
 * where the model takes it; cache_control, context_management, betas and metadata other than
 * user_id have no chat counterpart and are left out.
 */
export function translateMessagesRequest(raw: unknown, model: MessagesTarget): MessagesTranslation {
  const body = parse(AnthropicMessagesRequest, raw);
  if (body.messages.length === 0) throw fieldError('messages', 'messages: at least one message is required');
  const droppedTools: string[] = [];
  const tools = chatTools(body.tools, droppedTools);
  const chatBody: Record<string, unknown> = {
    model: model.id,
    messages: chatMessages(body.messages, systemText(body.system)),
    max_tokens: Math.min(body.max_tokens, model.maxTokens ?? body.max_tokens),
    ...(tools.length > 0 && { tools }),
    ...chatToolChoice(body.tool_choice, tools),
  };
  if (body.temperature !== undefined) chatBody.temperature = body.temperature;
  if (body.top_p !== undefined) chatBody.top_p = body.top_p;
  if (body.stop_sequences?.length) chatBody.stop = body.stop_sequences.slice(0, 4);
  if (typeof body.metadata?.user_id === 'string') chatBody.user = body.metadata.user_id;
  if (model.reasoning && body.thinking && body.thinking.type !== 'disabled')
    chatBody.reasoning_effort = EFFORT[body.output_config?.effort ?? ''] ?? 'medium';
  if (body.stream === true) {
    chatBody.stream = true;
    // The last chunk then carries the usage message_delta reports.
    chatBody.stream_options = { include_usage: true };
  }
  return { chatBody, model: body.model, stream: body.stream === true, droppedTools };
}

/** count_tokens' body, as the chat messages and tools its count is taken over. */
export function translateCountTokensRequest(raw: unknown): { model: string; messages: ChatMessage[]; tools: ChatTool[] } {
  const body = parse(AnthropicCountTokensRequest, raw);
  return { model: body.model, messages: chatMessages(body.messages, systemText(body.system)), tools: chatTools(body.tools, []) };
}

/** The model name of a body before it is validated (to pick the model the translation is for). */
export function requestedModel(raw: unknown): string {
  const model = (raw as { model?: unknown } | null)?.model;
  if (model === undefined || model === null || model === '') throw fieldError('model', 'model: Field required');
  if (typeof model !== 'string') throw fieldError('model', 'model: must be a string');
  return model;
}
