import { ApiError, type ChatTokenLimits } from '@atelier/contracts';
import { validateModelRequest, type ChatModelDefinition, type JsonSchemaObject, type ModelCatalog, type ModelDefinition, type ModelEndpoint, type ValidationIssue } from '@atelier/models';
import type { ChatMessage, ChatRequest, ChatTool, ResponseFormat, ToolChoice } from './chat-types';
import { countPromptTokens } from './token-count';
import { checkUserSchema, schemaRefusal, UserSchemaError } from './user-schema';

const ENDPOINT_PATHS: Readonly<Record<ModelEndpoint, string>> = {
  '/chat/completions': 'POST /api/ai/chat/completions',
  '/images/generate': 'POST /api/ai/images/generate',
  '/images/edit': 'POST /api/ai/images/edit',
  '/videos/generate': 'POST /api/ai/videos/generate',
  '/embeddings': 'POST /api/ai/embeddings',
};

/** A 400 listing every issue, each field in the envelope's `fields`. */
export function invalid(issues: Pick<ValidationIssue, 'field' | 'message'>[]): ApiError {
  return ApiError.badRequest(issues.map((i) => i.message).join('; '), { fields: issues.map(({ field, message }) => ({ field, message })) });
}

const fieldError = (field: string, message: string) => invalid([{ field, message }]);

/**
 * The catalog model a body names for a text endpoint, with the spec's texts for a missing or
 * unknown model, and a 400 naming the route that serves a model of another kind.
 */
export function resolveEndpointModel<E extends '/chat/completions' | '/embeddings'>(
  catalog: ModelCatalog,
  body: unknown,
  endpoint: E,
  kind: string,
): Extract<ModelDefinition, { endpoint: E }> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('Request body must be a JSON object');
  const name = (body as Record<string, unknown>).model;
  if (name === undefined || name === null || name === '') throw fieldError('model', 'You must specify a model to call');
  if (typeof name !== 'string') throw fieldError('model', 'model must be a string');
  const model = catalog.get(name);
  if (!model) throw new ApiError('resource_not_found', `Model not found: ${name}`);
  if (model.endpoint !== endpoint) throw fieldError('model', `Model ${name} is not ${kind}; use ${ENDPOINT_PATHS[model.endpoint]} for it`);
  return model as Extract<ModelDefinition, { endpoint: E }>;
}

/** The chat model a body names, with the spec's texts for a missing or unknown model. */
export function resolveChatModel(catalog: ModelCatalog, body: unknown): ChatModelDefinition {
  return resolveEndpointModel(catalog, body, '/chat/completions', 'a chat model');
}

export interface ParsedChatRequest {
  request: ChatRequest;
  /** The validated body (schema defaults filled in), as a provider should receive it. */
  body: Record<string, unknown>;
  /** o200k count of the prompt, the basis of the reservation and of local-chat's usage. */
  promptTokens: number;
}

/**
 * Validates a chat body for a model: first against the model's json_request_schema (types,
 * ranges, roles, content parts, with the spec's texts), then the rules a schema cannot express:
 * tool messages answer an earlier tool call, tool_choice names a declared tool, caller-supplied
 * JSON Schemas would compile, and the prompt plus the completion fit the context window.
 */
export function parseChatRequest(model: ChatModelDefinition, raw: unknown, options: { inPlace?: boolean; clampMaxTokens?: boolean } = {}): ParsedChatRequest {
  // Read before validation, which may fill in a default max_tokens.
  const maxTokensGiven = typeof raw === 'object' && raw !== null && (raw as Record<string, unknown>).max_tokens !== undefined;
  const result = validateModelRequest(model, raw, { inPlace: options.inPlace });
  if (!result.ok) throw invalid(result.errors);
  const body = result.value;
  const messages = body.messages as ChatMessage[];
  checkConversation(messages);

  const tools = (body.tools as ChatTool[] | undefined) ?? [];
  checkTools(tools);
  resolveToolChoice(body.tool_choice as ToolChoice | undefined, tools);
  const responseFormat = (body.response_format as ResponseFormat | undefined) ?? { type: 'text' };
  if (responseFormat.type === 'json_schema' && responseFormat.json_schema.schema !== undefined)
    checkSchema(responseFormat.json_schema.schema, 'response_format.json_schema.schema');
  if (body.n !== undefined && body.n !== 1) throw fieldError('n', 'n must be 1: atelier returns one choice per request');

  // Counted only as far as the context window: past it, the request is refused whatever the rest holds.
  const promptTokens = countPromptTokens(messages, tools, model.context_window);
  const explicit = (body.max_completion_tokens ?? body.max_tokens) as number | undefined;
  const userSet = body.max_completion_tokens !== undefined || maxTokensGiven;
  const room = model.context_window - promptTokens;
  if (room < 0) throw fieldError('messages', `The messages use more than the context window of model ${model.id} (${model.context_window} tokens)`);
  if (room === 0)
    throw fieldError('messages', `The messages use all ${promptTokens} tokens of the context window of model ${model.id}, leaving none for the completion`);
  let maxTokens: number;
  if (userSet && explicit !== undefined) {
    // A ceiling rather than a demand (Anthropic's max_tokens): what the context window leaves.
    if (explicit > room && options.clampMaxTokens) {
      maxTokens = room;
      body[body.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens'] = room;
    }
    else if (explicit > room)
      throw fieldError(
        body.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens',
        `The messages use ${promptTokens} tokens and ${explicit} completion tokens were requested, more than the context window of model ${model.id} (${model.context_window} tokens)`,
      );
    else maxTokens = explicit;
  } else {
    maxTokens = Math.min(model.default_max_tokens, room);
  }

  return { request: chatRequestFrom(model.id, body, { promptTokens, maxTokens, maxTokensExplicit: userSet }), body, promptTokens };
}

/**
 * The typed view of a body parseChatRequest has already validated and counted: the gateway
 * validates once and sends the body with its token limits, and the chat service reads it with
 * this instead of validating and counting again.
 */
export function chatRequestFrom(modelId: string, body: Record<string, unknown>, limits: ChatTokenLimits): ChatRequest {
  const tools = (body.tools as ChatTool[] | undefined) ?? [];
  const stop = body.stop === undefined ? [] : typeof body.stop === 'string' ? [body.stop] : (body.stop as string[]);
  return {
    model: modelId,
    messages: body.messages as ChatMessage[],
    stream: body.stream === true,
    maxTokens: limits.maxTokens,
    maxTokensExplicit: limits.maxTokensExplicit,
    temperature: (body.temperature as number | undefined) ?? 1,
    topP: (body.top_p as number | undefined) ?? 1,
    frequencyPenalty: (body.frequency_penalty as number | undefined) ?? 0,
    presencePenalty: (body.presence_penalty as number | undefined) ?? 0,
    stop: stop.filter((s) => s.length > 0),
    seed: body.seed as number | undefined,
    tools,
    toolChoice: resolveToolChoice(body.tool_choice as ToolChoice | undefined, tools),
    parallelToolCalls: body.parallel_tool_calls !== false,
    responseFormat: (body.response_format as ResponseFormat | undefined) ?? { type: 'text' },
  };
}

function checkConversation(messages: ChatMessage[]): void {
  const answered = new Set<string>();
  let open = new Set<string>();
  messages.forEach((m, i) => {
    if (m.role === 'assistant') {
      const calls = m.tool_calls ?? [];
      const hasContent = m.content !== undefined && m.content !== null && !(Array.isArray(m.content) && m.content.length === 0);
      if (!hasContent && calls.length === 0)
        throw fieldError(`messages[${i}].content`, `messages[${i}].content is required unless the assistant message has tool_calls`);
      open = new Set(calls.map((c) => c.id));
      return;
    }
    if (m.role === 'tool') {
      const id = m.tool_call_id as string;
      if (!open.has(id))
        throw fieldError(
          `messages[${i}].tool_call_id`,
          `messages[${i}].tool_call_id '${id}' does not answer a tool call of the preceding assistant message`,
        );
      if (answered.has(id)) throw fieldError(`messages[${i}].tool_call_id`, `messages[${i}].tool_call_id '${id}' is answered twice`);
      answered.add(id);
      return;
    }
    open = new Set();
  });
}

function checkSchema(schema: JsonSchemaObject, field: string): void {
  try {
    checkUserSchema(schema);
  } catch (err) {
    if (err instanceof UserSchemaError) throw fieldError(field, schemaRefusal(field, err));
    throw err;
  }
}

function checkTools(tools: ChatTool[]): void {
  const seen = new Set<string>();
  tools.forEach((tool, i) => {
    const name = tool.function.name;
    if (seen.has(name)) throw fieldError(`tools[${i}].function.name`, `tools[${i}].function.name '${name}' is declared twice`);
    seen.add(name);
    if (tool.function.parameters !== undefined) checkSchema(tool.function.parameters, `tools[${i}].function.parameters`);
  });
}

function resolveToolChoice(choice: ToolChoice | undefined, tools: ChatTool[]): ToolChoice {
  if (choice === undefined) return tools.length > 0 ? 'auto' : 'none';
  if (choice === 'none') return choice;
  if (tools.length === 0) throw fieldError('tool_choice', 'tool_choice needs tools: declare the functions the model may call');
  if (typeof choice === 'object' && !tools.some((t) => t.function.name === choice.function.name))
    throw fieldError('tool_choice.function.name', `tool_choice.function.name '${choice.function.name}' is not one of the declared tools`);
  return choice;
}

/**
 * The parameters of OpenAI's chat completions API. Unknown top-level fields are accepted, as
 * OpenAI SDKs send new ones before every gateway knows them, but only these travel on to a
 * provider: a field nobody defined (a 5 MB `pad`) is dropped here, not forwarded. `store` and
 * `metadata` are atelier's (its stored completions), so a provider never stores the request too.
 */
export const OPENAI_CHAT_FIELDS: ReadonlySet<string> = new Set([
  'model', 'messages', 'audio', 'frequency_penalty', 'function_call', 'functions', 'logit_bias', 'logprobs',
  'max_completion_tokens', 'max_tokens', 'modalities', 'n', 'parallel_tool_calls', 'prediction',
  'presence_penalty', 'prompt_cache_key', 'reasoning_effort', 'response_format', 'safety_identifier', 'seed',
  'service_tier', 'stop', 'stream', 'stream_options', 'temperature', 'tool_choice', 'tools', 'top_logprobs',
  'top_p', 'user', 'verbosity', 'web_search_options',
]);

/** The body a provider receives: the caller's OpenAI fields, without atelier's own or unknown ones. */
export function providerBody(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([field]) => OPENAI_CHAT_FIELDS.has(field)));
}
