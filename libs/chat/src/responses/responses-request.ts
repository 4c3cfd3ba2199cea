import { ApiError } from '@atelier/contracts';
import { randomToken } from '@atelier/random';
import type { ChatContentPart, ChatMessage, ChatTool, ChatToolCall } from '../chat-types';

/**
 * The OpenAI Responses API's request, translated onto the chat completions lifecycle: input
 * items become chat messages, function, namespace and custom tools become chat functions, and
 * text.format becomes response_format. Everything a chat upstream cannot carry (hosted tools,
 * reasoning items, include) is accepted and left out; only what would change the answer's
 * meaning if ignored (forcing a hosted tool, conversation, background) is refused.
 */

/** One item of a Responses conversation, as clients send and atelier stores it (the fields atelier reads). */
export type ResponseItem = Record<string, unknown> & { type: string; id?: string };

/** Where a chat function name came from, to turn its calls back into the item the client declared. */
export interface ToolOrigin {
  kind: 'function' | 'custom';
  name: string;
  namespace?: string;
}

export interface ResponsesTranslation {
  /** The chat completions body (model, messages, tools...), validated next by the chat lifecycle. */
  chatBody: Record<string, unknown>;
  /** This request's input as items with ids (what input_items lists after the previous conversation). */
  inputItems: ResponseItem[];
  /** Chat function name -> the tool the client declared. */
  tools: Map<string, ToolOrigin>;
  /** Hosted tools a chat upstream cannot run, left out (x-atelier-dropped-tools). */
  droppedTools: string[];
  stream: boolean;
  store: boolean;
}

/** Output item types of hosted tools that may come back in a conversation; nothing a chat upstream can read. */
const SKIPPED_ITEMS = new Set([
  'reasoning', 'web_search_call', 'file_search_call', 'code_interpreter_call', 'image_generation_call', 'computer_call',
  'computer_call_output', 'local_shell_call', 'local_shell_call_output', 'mcp_call', 'mcp_list_tools', 'mcp_approval_request',
  'mcp_approval_response', 'shell_call', 'shell_call_output', 'apply_patch_call', 'apply_patch_call_output', 'compaction',
]);

/**
 * The fields each item type defines (besides `type` and `id`), as OpenAI's Responses API does:
 * anything else a client sends is dropped before the item is stored, so the store holds only what
 * a conversation needs.
 */
const ITEM_FIELDS: Record<string, readonly string[]> = {
  message: ['role', 'content', 'status', 'phase'],
  function_call: ['call_id', 'name', 'arguments', 'namespace', 'status'],
  function_call_output: ['call_id', 'output', 'status'],
  custom_tool_call: ['call_id', 'name', 'input', 'namespace', 'status'],
  custom_tool_call_output: ['call_id', 'output', 'status'],
  reasoning: ['summary', 'content', 'encrypted_content', 'status'],
  compaction: ['encrypted_content'],
  web_search_call: ['action', 'status'],
  file_search_call: ['queries', 'results', 'status'],
  code_interpreter_call: ['code', 'container_id', 'outputs', 'status'],
  image_generation_call: ['result', 'status'],
  computer_call: ['call_id', 'action', 'pending_safety_checks', 'status'],
  computer_call_output: ['call_id', 'output', 'acknowledged_safety_checks', 'status'],
  local_shell_call: ['call_id', 'action', 'status'],
  local_shell_call_output: ['output', 'status'],
  mcp_call: ['server_label', 'name', 'arguments', 'output', 'error', 'approval_request_id', 'status'],
  mcp_list_tools: ['server_label', 'tools', 'error'],
  mcp_approval_request: ['server_label', 'name', 'arguments'],
  mcp_approval_response: ['approval_request_id', 'approve', 'reason'],
  shell_call: ['call_id', 'action', 'status'],
  shell_call_output: ['call_id', 'output', 'max_output_length'],
  apply_patch_call: ['call_id', 'operation', 'status'],
  apply_patch_call_output: ['call_id', 'output', 'status'],
};
/** A message's content parts, likewise (annotations and logprobs are an answer's metadata, not conversation). */
const PART_FIELDS: Record<string, readonly string[]> = {
  input_text: ['text'],
  output_text: ['text'],
  text: ['text'],
  refusal: ['refusal'],
  input_image: ['image_url', 'detail', 'file_id'],
  input_file: ['file_id', 'file_url', 'file_data', 'filename'],
};
/**
 * The most bytes one item a chat upstream never reads (reasoning with its encrypted_content, hosted
 * tools' calls) may hold: it costs no tokens, so without a bound it would be storage for free.
 * OpenAI bounds its own opaque fields likewise; 256 KiB holds any real reasoning item.
 */
export const MAX_UNCOUNTED_ITEM_BYTES = 256 * 1024;

const pick = (raw: Record<string, unknown>, fields: readonly string[]) => Object.fromEntries(fields.filter((f) => raw[f] !== undefined).map((f) => [f, raw[f]]));

/** An item with only its type's fields (and its content parts with only theirs); an uncounted item within its bound. */
function sanitizeItem(raw: Record<string, unknown>, type: string, id: string, at: string): ResponseItem {
  const fields = ITEM_FIELDS[type];
  if (!fields) return { type, id };
  const item: ResponseItem = { type, id, ...pick(raw, fields) };
  if (type === 'message' && Array.isArray(item.content))
    item.content = item.content.map((part) => (isObject(part) && typeof part.type === 'string' && PART_FIELDS[part.type] ? { type: part.type, ...pick(part, PART_FIELDS[part.type]) } : part));
  if (SKIPPED_ITEMS.has(type)) {
    const bytes = Buffer.byteLength(JSON.stringify(item));
    if (bytes > MAX_UNCOUNTED_ITEM_BYTES)
      throw fieldError(at, `${at}: a ${type} item may hold at most ${MAX_UNCOUNTED_ITEM_BYTES} bytes (this one holds ${bytes}); it is not sent to a chat model, so it is not counted in tokens`);
  }
  return item;
}

/** A 400 naming the parameter, in the envelope's `fields` as every validation refusal does. */
export const fieldError = (param: string, message: string) => ApiError.badRequest(message, { fields: [{ field: param, message }] });
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function str(value: unknown, param: string, optional = false): string | undefined {
  if (value === undefined || value === null) {
    if (optional) return undefined;
    throw fieldError(param, `${param} is required`);
  }
  if (typeof value !== 'string') throw fieldError(param, `${param} must be a string`);
  return value;
}

/** A chat function name for a namespaced tool: chat has no namespaces, and names allow only [A-Za-z0-9_-]. */
export function flatToolName(namespace: string, name: string): string {
  return `${namespace}__${name}`;
}

export const itemId = (prefix: string) => `${prefix}_${randomToken(24)}`;

/** Text of a message's content: a string, or input_text / output_text / refusal parts. */
function partsText(content: unknown, param: string): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw fieldError(param, `${param} must be a string or an array of content parts`);
  return content
    .map((part, j) => {
      if (!isObject(part)) throw fieldError(`${param}[${j}]`, `${param}[${j}] must be an object`);
      if (part.type === 'input_text' || part.type === 'output_text' || part.type === 'text') return str(part.text, `${param}[${j}].text`);
      if (part.type === 'refusal') return str(part.refusal, `${param}[${j}].refusal`);
      throw fieldError(`${param}[${j}].type`, `${param}[${j}].type '${String(part.type)}' is not allowed here: only text parts`);
    })
    .join('');
}

function userContent(content: unknown, param: string): string | ChatContentPart[] {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw fieldError(param, `${param} must be a string or an array of content parts`);
  return content.map((part, j): ChatContentPart => {
    const at = `${param}[${j}]`;
    if (!isObject(part)) throw fieldError(at, `${at} must be an object`);
    if (part.type === 'input_text' || part.type === 'output_text') return { type: 'text', text: str(part.text, `${at}.text`) as string };
    if (part.type === 'input_image') {
      if (part.file_id !== undefined) throw fieldError(`${at}.file_id`, `${at}.file_id is not supported: send image_url (an https or data: URL)`);
      const url = str(part.image_url, `${at}.image_url`) as string;
      return { type: 'image_url', image_url: { url, ...(typeof part.detail === 'string' && { detail: part.detail }) } };
    }
    throw fieldError(`${at}.type`, `${at}.type '${String(part.type)}' is not supported: use input_text or input_image`);
  });
}

/** Gives every item an id (OpenAI lists input items with theirs) and the `message` type where it was implied. */
export function normalizeInput(input: unknown): ResponseItem[] {
  if (typeof input === 'string') return [{ type: 'message', id: itemId('msg'), role: 'user', content: [{ type: 'input_text', text: input }] }];
  if (!Array.isArray(input)) throw fieldError('input', 'input must be a string or an array of input items');
  if (input.length === 0) throw fieldError('input', 'input must hold at least one item');
  return input.map((raw, i) => {
    if (!isObject(raw)) throw fieldError(`input[${i}]`, `input[${i}] must be an object`);
    const type = raw.type ?? (raw.role !== undefined ? 'message' : undefined);
    if (typeof type !== 'string') throw fieldError(`input[${i}].type`, `input[${i}].type is required`);
    if (type === 'item_reference') throw fieldError(`input[${i}].type`, `input[${i}]: item_reference is not supported; use previous_response_id`);
    const prefix = type === 'message' ? 'msg' : type === 'function_call' ? 'fc' : type === 'custom_tool_call' ? 'ctc' : 'item';
    const id = typeof raw.id === 'string' && raw.id.length <= 200 ? raw.id : itemId(prefix);
    // An unknown type keeps its type (itemsToMessages refuses it, naming it), nothing else.
    return sanitizeItem(raw, type, id, `input[${i}]`);
  });
}

/**
 * The chat messages of a conversation's items. Developer and system messages (and the
 * instructions) become one leading system message, as chat upstreams expect one; function and
 * custom tool calls join the assistant message before them; reasoning and hosted tools' items
 * have nothing a chat upstream can read and are left out.
 */
export function itemsToMessages(items: readonly ResponseItem[], instructions: string | undefined, firstNew: number): ChatMessage[] {
  const system: string[] = instructions ? [instructions] : [];
  const messages: ChatMessage[] = [];
  const called = new Set<string>();
  let assistant: ChatMessage | undefined;
  const param = (i: number) => (i >= firstNew ? `input[${i - firstNew}]` : `previous_response_id (item ${i})`);
  items.forEach((item, i) => {
    const at = param(i);
    if (item.type === 'message') {
      const role = item.role;
      if (role === 'system' || role === 'developer') {
        system.push(partsText(item.content, `${at}.content`));
        return;
      }
      if (role === 'user') {
        messages.push({ role: 'user', content: userContent(item.content, `${at}.content`) });
        assistant = undefined;
        return;
      }
      if (role === 'assistant') {
        assistant = { role: 'assistant', content: partsText(item.content, `${at}.content`) };
        messages.push(assistant);
        return;
      }
      throw fieldError(`${at}.role`, `${at}.role must be one of user, assistant, system, developer`);
    }
    if (item.type === 'function_call' || item.type === 'custom_tool_call') {
      const callId = str(item.call_id, `${at}.call_id`) as string;
      const name = str(item.name, `${at}.name`) as string;
      const namespace = str(item.namespace, `${at}.namespace`, true);
      const args = item.type === 'function_call' ? (str(item.arguments, `${at}.arguments`) as string) : JSON.stringify({ input: str(item.input, `${at}.input`) });
      const call: ChatToolCall = { id: callId, type: 'function', function: { name: namespace ? flatToolName(namespace, name) : name, arguments: args } };
      if (!assistant) {
        assistant = { role: 'assistant', content: null };
        messages.push(assistant);
      }
      (assistant.tool_calls ??= []).push(call);
      called.add(callId);
      return;
    }
    if (item.type === 'function_call_output' || item.type === 'custom_tool_call_output') {
      const callId = str(item.call_id, `${at}.call_id`) as string;
      if (!called.has(callId)) throw fieldError(`${at}.call_id`, `No tool call found for function call output with call_id ${callId}.`);
      const output = item.output;
      messages.push({ role: 'tool', tool_call_id: callId, content: typeof output === 'string' ? output : partsText(output, `${at}.output`) });
      // Results of a call come after all of the calls of one turn; text that follows starts a new message.
      assistant = messages.at(-1)?.role === 'tool' ? undefined : assistant;
      return;
    }
    if (SKIPPED_ITEMS.has(item.type)) return;
    throw fieldError(`${at}.type`, `${at}.type '${item.type}' is not a known input item type`);
  });
  return system.length > 0 ? [{ role: 'system', content: system.join('\n\n') }, ...messages] : messages;
}

function functionTool(raw: Record<string, unknown>, param: string, chatName: string): ChatTool {
  str(raw.name, `${param}.name`);
  if (raw.parameters !== undefined && raw.parameters !== null && !isObject(raw.parameters)) throw fieldError(`${param}.parameters`, `${param}.parameters must be a JSON Schema object`);
  return {
    type: 'function',
    function: {
      name: chatName,
      ...(typeof raw.description === 'string' && { description: raw.description }),
      parameters: (raw.parameters as ChatTool['function']['parameters']) ?? { type: 'object', properties: {} },
      ...(typeof raw.strict === 'boolean' && { strict: raw.strict }),
    },
  };
}

interface TranslatedTools {
  chat: ChatTool[];
  origins: Map<string, ToolOrigin>;
  dropped: string[];
}

export function translateTools(raw: unknown): TranslatedTools {
  const out: TranslatedTools = { chat: [], origins: new Map(), dropped: [] };
  if (raw === undefined || raw === null) return out;
  if (!Array.isArray(raw)) throw fieldError('tools', 'tools must be an array');
  raw.forEach((tool, i) => {
    const at = `tools[${i}]`;
    if (!isObject(tool) || typeof tool.type !== 'string') throw fieldError(`${at}.type`, `${at}.type is required`);
    if (tool.type === 'function') {
      const name = tool.name as string;
      out.chat.push(functionTool(tool, at, name));
      out.origins.set(name, { kind: 'function', name });
    } else if (tool.type === 'namespace') {
      const namespace = str(tool.name, `${at}.name`) as string;
      if (!Array.isArray(tool.tools)) throw fieldError(`${at}.tools`, `${at}.tools must be an array of function tools`);
      tool.tools.forEach((inner, j) => {
        if (!isObject(inner) || inner.type !== 'function') throw fieldError(`${at}.tools[${j}].type`, `${at}.tools[${j}].type must be function`);
        const chatName = flatToolName(namespace, inner.name as string);
        out.chat.push(functionTool(inner, `${at}.tools[${j}]`, chatName));
        out.origins.set(chatName, { kind: 'function', name: inner.name as string, namespace });
      });
    } else if (tool.type === 'custom') {
      const name = str(tool.name, `${at}.name`) as string;
      // A freeform tool takes one string; a chat function can carry it as its one argument.
      const description = [tool.description, isObject(tool.format) && tool.format.type === 'grammar' ? `Input grammar (${String(tool.format.syntax)}): ${String(tool.format.definition)}` : undefined]
        .filter((s): s is string => typeof s === 'string')
        .join('\n\n');
      out.chat.push({
        type: 'function',
        function: {
          name,
          ...(description && { description }),
          parameters: { type: 'object', properties: { input: { type: 'string', description: 'The tool input, free text' } }, required: ['input'], additionalProperties: false },
        },
      });
      out.origins.set(name, { kind: 'custom', name });
    } else {
      // Every other type is a tool OpenAI runs on its side (web_search, file_search, mcp, ...; new
      // ones keep coming): atelier cannot run it, so a chat upstream never sees it.
      out.dropped.push(tool.type);
    }
  });
  return out;
}

function translateToolChoice(choice: unknown, tools: TranslatedTools): unknown {
  if (choice === undefined || choice === null) return undefined;
  if (choice === 'none' || choice === 'auto' || choice === 'required') {
    if (tools.chat.length > 0) return choice;
    if (choice === 'required')
      throw fieldError('tool_choice', tools.dropped.length > 0 ? `tool_choice 'required' needs a function tool; atelier cannot run the hosted tools declared (${tools.dropped.join(', ')})` : "tool_choice 'required' needs tools");
    return undefined;
  }
  if (!isObject(choice) || typeof choice.type !== 'string') throw fieldError('tool_choice', "tool_choice must be 'none', 'auto', 'required' or an object naming a tool");
  if (choice.type === 'function' || choice.type === 'custom') {
    const name = str(choice.name, 'tool_choice.name') as string;
    const namespace = str(choice.namespace, 'tool_choice.namespace', true);
    const chatName = namespace ? flatToolName(namespace, name) : name;
    if (!tools.origins.has(chatName)) throw fieldError('tool_choice.name', `tool_choice.name '${name}' is not one of the declared tools`);
    return { type: 'function', function: { name: chatName } };
  }
  if (choice.type === 'allowed_tools') {
    const mode = choice.mode === 'required' ? 'required' : 'auto';
    return tools.chat.length > 0 ? mode : undefined;
  }
  throw fieldError('tool_choice', `tool_choice forces the hosted tool '${choice.type}', which atelier cannot run; declare a function tool instead`);
}

function translateFormat(text: unknown): unknown {
  if (text === undefined || text === null) return undefined;
  if (!isObject(text)) throw fieldError('text', 'text must be an object');
  const format = text.format;
  if (format === undefined || format === null) return undefined;
  if (!isObject(format)) throw fieldError('text.format', 'text.format must be an object');
  if (format.type === 'text' || format.type === 'json_object') return { type: format.type };
  if (format.type === 'json_schema') {
    const name = str(format.name, 'text.format.name') as string;
    if (!isObject(format.schema)) throw fieldError('text.format.schema', 'text.format.schema must be a JSON Schema object');
    return {
      type: 'json_schema',
      json_schema: {
        name,
        schema: format.schema,
        ...(typeof format.description === 'string' && { description: format.description }),
        ...(typeof format.strict === 'boolean' && { strict: format.strict }),
      },
    };
  }
  throw fieldError('text.format.type', 'text.format.type must be one of text, json_object, json_schema');
}

/** Fields copied to the chat body as they are (same name, same meaning). */
const SAME_FIELDS = ['model', 'temperature', 'top_p', 'user', 'target_namespace'] as const;

/**
 * Translates a Responses body. `history` is the stored conversation of previous_response_id
 * (its input items, then its output), already loaded by the caller.
 */
export function translateResponsesRequest(body: Record<string, unknown>, history: readonly ResponseItem[]): ResponsesTranslation {
  if (body.conversation !== undefined && body.conversation !== null)
    throw fieldError('conversation', 'conversation is not supported: continue a conversation with previous_response_id');
  if (body.input === undefined || body.input === null) throw fieldError('input', 'input is required');
  const instructions = str(body.instructions, 'instructions', true);
  const inputItems = normalizeInput(body.input);
  const tools = translateTools(body.tools);
  const toolChoice = translateToolChoice(body.tool_choice, tools);
  const messages = itemsToMessages([...history, ...inputItems], instructions, history.length);
  const stream = body.stream === true;
  const chatBody: Record<string, unknown> = { messages, stream };
  for (const field of SAME_FIELDS) if (body[field] !== undefined && body[field] !== null) chatBody[field] = body[field];
  if (body.max_output_tokens !== undefined && body.max_output_tokens !== null) chatBody.max_completion_tokens = body.max_output_tokens;
  if (tools.chat.length > 0) {
    chatBody.tools = tools.chat;
    if (typeof body.parallel_tool_calls === 'boolean') chatBody.parallel_tool_calls = body.parallel_tool_calls;
  }
  if (toolChoice !== undefined) chatBody.tool_choice = toolChoice;
  const format = translateFormat(body.text);
  if (format !== undefined) chatBody.response_format = format;
  if (isObject(body.reasoning) && typeof body.reasoning.effort === 'string') chatBody.reasoning_effort = body.reasoning.effort;
  if (stream) chatBody.stream_options = { include_usage: true };
  return { chatBody, inputItems, tools: tools.origins, droppedTools: [...new Set(tools.dropped)], stream, store: body.store !== false };
}
