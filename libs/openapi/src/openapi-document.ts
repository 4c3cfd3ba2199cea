import { z } from 'zod';
import { ADMIN_USAGE_GROUPS, AdjustCreditsRequest, CreateBatchRequest, CreateExperimentRequest, PromoteExperimentRequest, CreateFeedbackMetricRequest, CreateFeedbackRequest, UpdateStoredCompletionRequest, EXPORT_MAX_ROWS, EXPORT_MAX_QUEUED_ROWS, ExportCompletionsRequest, AnthropicCountTokensRequest, AnthropicMessagesRequest, FILE_PURPOSES, ConsoleSignInRequest, NamespaceLimitsRequest, CreateBranchRequest, CreateOrgRequest, CreateRepositoryRequest, CreateUserRequest, USAGE_GROUPS } from '@atelier/contracts';
import { API_SCOPES } from '@atelier/auth';
import { createFineTuneJsonSchema, exampleCreateBody, FINE_TUNE_STATES, SCRIPT_TYPES } from '@atelier/fine-tune';
import { buildJsonRequestSchema, MODALITIES, MODEL_ENDPOINTS, supportsQueue, type ModelCatalog, type ModelDefinition, type ModelEndpoint, type RequestMode } from '@atelier/models';
import { responseSchemas } from './response-schemas';

type Schema = Record<string, unknown>;

const API_KEY_LIMITS: Schema = {
  type: 'object',
  additionalProperties: false,
  properties: { rpm: { type: 'integer', minimum: 1 }, read_rpm: { type: 'integer', minimum: 1 }, tpm: { type: 'integer', minimum: 1 }, max_concurrent: { type: 'integer', minimum: 1 } },
};
const API_KEY_BUDGET: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['max_spend', 'period'],
  properties: { max_spend: { type: 'string', pattern: '^\\d+(\\.\\d{1,6})?$' }, period: { type: 'string', enum: ['day', 'month', 'total'] } },
};
/** The fields of a key a user (or, all optional, the operator) makes. */
const API_KEY_FIELDS: Record<string, Schema> = {
  name: { type: 'string', minLength: 1, maxLength: 100 },
  namespace: { type: 'string' },
  scopes: { type: 'array', minItems: 1, items: { type: 'string', enum: [...API_SCOPES] } },
  expires_at: { oneOf: [{ type: 'string', format: 'date-time' }, { type: 'integer', description: 'Unix seconds' }] },
  limits: API_KEY_LIMITS,
  budget: API_KEY_BUDGET,
};
const USAGE_QUERY: { name: string; schema: Schema; description?: string }[] = [
  { name: 'namespace', schema: { type: 'string' }, description: "Defaults to the caller's own" },
  { name: 'from', schema: { type: 'string' }, description: 'Inclusive; ISO 8601 time or date (UTC), or Unix seconds. Default: the start of the current UTC month' },
  { name: 'to', schema: { type: 'string' }, description: 'Exclusive; as from. Default: now' },
  { name: 'group_by', schema: { type: 'string', enum: [...USAGE_GROUPS], default: 'day' } },
  { name: 'format', schema: { type: 'string', enum: ['json', 'csv'], default: 'json' } },
  {
    name: 'split_by',
    schema: { type: 'string', enum: [...USAGE_GROUPS] },
    description: 'A second dimension, other than group_by: each row is one (group, split) pair, e.g. group_by=day&split_by=model for a series per model',
  },
];
type Method = 'get' | 'post' | 'put' | 'delete';
type Access = 'key' | 'admin' | 'public' | 'trainer';

interface Operation {
  method: Method;
  /** Fastify's pattern, exactly as the route is registered (`:param`, `*`). */
  route: string;
  tag: string;
  summary: string;
  access: Access;
  description?: string;
  body?: Schema;
  /** Content type of the body when it is not JSON. */
  bodyType?: string;
  query?: { name: string; schema: Schema; description?: string }[];
  headers?: { name: string; schema: Schema; description?: string }[];
  /** Success status → [description, schema name or inline schema, content type]. */
  responses: Record<number, [string, (Schema | string)?, string?]>;
  /** Accepts an Idempotency-Key header (routes marked IDEMPOTENT in the gateway). */
  idempotent?: boolean;
  /** Named request-body examples (OpenAPI `examples`). */
  bodyExamples?: Record<string, unknown>;
  /** The shape its errors come in, when not atelier's envelope (Anthropic's routes). */
  errorShape?: string;
}

const IDEMPOTENCY_KEY_PARAMETER = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' },
  description:
    'Makes a retry safe: the first request with a key runs and its final answer is stored for IDEMPOTENCY_TTL_SECONDS (default 24 h); ' +
    'the same key, route and body again gets that answer with `Idempotent-Replayed: true` and runs and charges nothing. ' +
    'The same key with another body or route: 422 `idempotency_key_reused`; while the first request runs: 409 `idempotency_key_in_use`. ' +
    '5xx and 429 answers are not stored. Not with `stream: true` (400). Scoped to the authenticated user.',
};

/** `/api/ai/queue/:id` → `/api/ai/queue/{id}`; a trailing wildcard becomes `{path}` (it may contain slashes). */
export function openApiPath(fastifyUrl: string): string {
  return fastifyUrl.replace(/:([A-Za-z_][\w]*)/g, '{$1}').replace(/\*$/, '{path}');
}

/** A zod request contract as JSON Schema: what the client sends (the input side of transforms). */
const fromZod = (schema: z.ZodType): Schema => {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Schema;
  delete json.$schema;
  return json;
};

/** A model's own json_request_schema, as validateModelRequest checks it; `$id` keeps its local `#/$defs` refs resolvable. */
function modelSchema(model: ModelDefinition, mode: RequestMode): Schema {
  const schema = buildJsonRequestSchema(model, mode) as Schema;
  delete schema.$schema;
  if (schema.$defs !== undefined) schema.$id = `urn:atelier:model:${model.id}:${mode}`;
  return schema;
}

/** One alternative per model serving the endpoint(s): the body is whatever the chosen model's schema accepts. */
function modelsBody(catalog: ModelCatalog, endpoints: ModelEndpoint[], mode: RequestMode): Schema {
  const models = catalog.list({}).filter((m) => endpoints.includes(m.endpoint) && (mode === 'sync' || supportsQueue(m)));
  const oneOf = models.map((m) => modelSchema(m, mode));
  return {
    type: 'object',
    required: ['model'],
    description: `One of the catalog's models (${models.map((m) => m.id).join(', ')}); each model's full schema is also served as json_request_schema by GET /api/ai/models/{id}.`,
    oneOf,
  };
}

const page = (max: number, def: number) => [
  { name: 'limit', schema: { type: 'integer', minimum: 1, maximum: max, default: def } },
  { name: 'offset', schema: { type: 'integer', minimum: 0, default: 0 } },
];

function operations(catalog: ModelCatalog): Operation[] {
  const chat = modelsBody(catalog, ['/chat/completions'], 'sync');
  return [
    {
      method: 'post',
      route: '/api/ai/chat/completions',
      idempotent: true,
      tag: 'Chat',
      summary: 'Chat completion (OpenAI-compatible)',
      access: 'key',
      description:
        'With `stream: true` the answer is a `text/event-stream` of `data: <chat.completion.chunk>` lines ending with `data: [DONE]`. ' +
        '`store: true` (with up to 16 `metadata` pairs) keeps the request and the answer (a stream assembled whole) as a stored completion for STORED_COMPLETIONS_TTL_DAYS; ' +
        "neither field is sent to the provider. The namespace's `capture_rate` may store a share without it; `store: false`, and a key made with `store: false`, never store. docs/learning.md.",
      body: chat,
      responses: { 200: ['The completion (or an event stream when `stream` is true)', 'ChatCompletion'] },
    },
    {
      method: 'get',
      route: '/api/ai/chat/completions',
      tag: 'Learning',
      summary: "Stored completions (OpenAI's Stored Completions, `client.chat.completions.list`), oldest first by default",
      access: 'key',
      query: [
        { name: 'model', schema: { type: 'string' } },
        { name: 'metadata[<key>]', schema: { type: 'string' }, description: 'Only completions whose metadata has this pair (repeatable)' },
        { name: 'metric', schema: { type: 'string' }, description: "atelier's: only completions with feedback on this metric" },
        { name: 'min_value', schema: { type: 'number' }, description: "atelier's: ... of at least this value (needs metric)" },
        { name: 'namespace', schema: { type: 'string' }, description: "atelier's: another namespace of the caller's (default: the key's)" },
        { name: 'after', schema: { type: 'string' }, description: 'A completion id: the page after it' },
        { name: 'limit', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
        { name: 'order', schema: { type: 'string', enum: ['asc', 'desc'], default: 'asc' } },
      ],
      responses: { 200: ['A page of stored completions, each with its metadata and feedback', 'StoredCompletionList'] },
    },
    {
      method: 'post',
      route: '/api/ai/chat/completions/export',
      tag: 'Learning',
      summary: 'Export matching stored completions as a Parquet dataset, committed to a repo of their namespace',
      access: 'key',
      description:
        'Columns `messages` (a JSON list of {role, content}: the text_chat_messages layout, so a fine-tune with `messages_column: "messages"` trains on it), `completion_id`, `model`. ' +
        'Completions that are not text only (tool calls, images, no answer) are left out and counted in `skipped`; the commit message names the count and the filter. ' +
        `Up to ${EXPORT_MAX_ROWS} matching completions it runs inside the request (200); past that, or with \`background: true\`, it is queued on the completion-export queue (202, up to ${EXPORT_MAX_QUEUED_ROWS}): follow it with GET .../exports/{id} or the \`export.status\` event of GET /api/events. The key needs the repos and chat scopes. docs/learning.md.`,
      body: fromZod(ExportCompletionsRequest),
      responses: { 200: ['The export: rows, skipped, the filter and the commit', { type: 'object' }], 202: ['Queued: the export to follow', 'CompletionExport'] },
    },
    {
      method: 'get',
      route: '/api/ai/chat/completions/exports/:id',
      tag: 'Learning',
      summary: 'A queued export: its status, progress and, once completed, its commit',
      access: 'key',
      responses: { 200: ['The export', 'CompletionExport'] },
    },
    { method: 'get', route: '/api/ai/chat/completions/:id', tag: 'Learning', summary: 'A stored completion, with its metadata and feedback', access: 'key', responses: { 200: ['The stored completion', 'StoredCompletion'] } },
    {
      method: 'get',
      route: '/api/ai/chat/completions/:id/messages',
      tag: 'Learning',
      summary: "A stored completion's request messages (each with an id), oldest first by default",
      access: 'key',
      query: [
        { name: 'after', schema: { type: 'string' }, description: 'A message id: the page after it' },
        { name: 'limit', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
        { name: 'order', schema: { type: 'string', enum: ['asc', 'desc'], default: 'asc' } },
      ],
      responses: { 200: ['A page of messages', 'StoredMessageList'] },
    },
    {
      method: 'post',
      route: '/api/ai/chat/completions/:id',
      tag: 'Learning',
      summary: "Replace a stored completion's metadata (null clears it)",
      access: 'key',
      body: fromZod(UpdateStoredCompletionRequest),
      responses: { 200: ['The stored completion', 'StoredCompletion'] },
    },
    { method: 'delete', route: '/api/ai/chat/completions/:id', tag: 'Learning', summary: 'Delete a stored completion and its feedback', access: 'key', responses: { 200: ['Deleted', 'StoredCompletionDeleted'] } },
    {
      method: 'post',
      route: '/api/ai/feedback',
      tag: 'Learning',
      summary: 'Judge a stored completion or response on a metric of its namespace',
      access: 'key',
      description: 'A boolean metric takes true or false (kept as 1 or 0), a float metric a number. A target of another namespace is 404; an undeclared metric 400.',
      body: fromZod(CreateFeedbackRequest),
      responses: { 200: ['The feedback', 'Feedback'] },
    },
    {
      method: 'get',
      route: '/api/ai/feedback',
      tag: 'Learning',
      summary: 'The feedback on one stored completion or response, oldest first',
      access: 'key',
      query: [{ name: 'target_id', schema: { type: 'string' }, description: 'Required: a chatcmpl-... or resp_... id' }],
      responses: { 200: ['Its feedback', 'FeedbackList'] },
    },
    {
      method: 'post',
      route: '/api/feedback_metrics',
      tag: 'Learning',
      summary: 'Declare a feedback metric in a namespace (boolean or float; optimize max or min)',
      access: 'key',
      body: fromZod(CreateFeedbackMetricRequest),
      responses: { 201: ['The metric', 'FeedbackMetric'], 409: ['The namespace has a metric of that name', 'Error'] },
    },
    {
      method: 'get',
      route: '/api/feedback_metrics',
      tag: 'Learning',
      summary: "A namespace's feedback metrics",
      access: 'key',
      query: [{ name: 'namespace', schema: { type: 'string' }, description: "default: the key's" }],
      responses: { 200: ['Its metrics', 'FeedbackMetricList'] },
    },
    {
      method: 'post',
      route: '/api/ai/experiments',
      tag: 'Learning',
      summary: 'Make a name a model id of the namespace whose requests go to variants by weight',
      access: 'key',
      description:
        'Variants are chat models of the catalog or chat fine-tunes deployed in the namespace; their weights sum to 1. Requests naming the experiment go to a variant by weight, ' +
        'sticky per `user` (else the caller) or per a metadata value with `sticky_by`; the answer names its variant in `model` and in `x-atelier-variant`. ' +
        'With a `metric`, the answers are stored (unless `store: false` or the key refuses) so feedback can be given on them; `mode: "adaptive"` moves the weights toward the variant that wins on the metric, each keeping at least `min_weight`. docs/learning.md.',
      body: fromZod(CreateExperimentRequest),
      responses: { 201: ['The experiment', 'Experiment'], 409: ['The name is taken (an experiment, a catalog model or a deployed model)', 'Error'] },
    },
    { method: 'get', route: '/api/ai/experiments', tag: 'Learning', summary: "A namespace's experiments", access: 'key', query: [{ name: 'namespace', schema: { type: 'string' }, description: "default: the key's" }], responses: { 200: ['Its experiments', 'ExperimentList'] } },
    {
      method: 'get',
      route: '/api/ai/experiments/:name',
      tag: 'Learning',
      summary: "An experiment with each variant's requests, latency p50/p95, cost and metric (mean with a 95 % interval), and its history",
      access: 'key',
      query: [{ name: 'namespace', schema: { type: 'string' }, description: "default: the key's" }],
      responses: { 200: ['The experiment', 'ExperimentDetail'] },
    },
    {
      method: 'post',
      route: '/api/ai/experiments/:name/promote',
      tag: 'Learning',
      summary: 'Send every request to one variant from now on (kept in the history)',
      access: 'key',
      query: [{ name: 'namespace', schema: { type: 'string' }, description: "default: the key's" }],
      body: fromZod(PromoteExperimentRequest),
      responses: { 200: ['The experiment', 'Experiment'] },
    },
    { method: 'delete', route: '/api/ai/experiments/:name', tag: 'Learning', summary: 'Delete an experiment, its records and history (its name is free again)', access: 'key', query: [{ name: 'namespace', schema: { type: 'string' }, description: "default: the key's" }], responses: { 200: ['Deleted', 'ExperimentDeleted'] } },
    {
      method: 'post',
      route: '/api/ai/responses',
      idempotent: true,
      tag: 'Chat',
      summary: "Create a response (OpenAI's Responses API, `client.responses.create`)",
      access: 'key',
      description:
        'Runs on the chat lifecycle (the same models, billing, limits, retries and fallbacks); usage is reported under /api/ai/responses. ' +
        '`input` is a string or items (messages; function_call / function_call_output; custom_tool_call / custom_tool_call_output). ' +
        'With `stream: true`, a `text/event-stream` of `event: <type>` / `data: <event>` pairs with increasing `sequence_number`, ending with ' +
        '`response.completed` (or `response.incomplete`), or `response.failed` if the upstream breaks off. ' +
        '`store` (default true) keeps the answer RESPONSES_TTL_DAYS for `previous_response_id`, which atelier continues for every upstream by rebuilding the history. ' +
        'Hosted tools (web_search, file_search, mcp, ...) are left out and named in `x-atelier-dropped-tools`; forcing one with tool_choice and `conversation` are 400. ' +
        '`background: true` (with `store`) answers at once with `status: "queued"` and runs on the gateways\' response-background queue; with `stream: true` too, the events are kept while it runs (`response.queued` first) and resumable with GET `?stream=true&starting_after=`. ' +
        'See docs/responses.md.',
      body: {
        type: 'object',
        required: ['model', 'input'],
        properties: {
          model: { type: 'string', description: 'A chat model of the catalog, or a deployed fine-tune' },
          input: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'object' } }] },
          instructions: { type: 'string' },
          previous_response_id: { type: 'string' },
          tools: { type: 'array', items: { type: 'object', required: ['type'] } },
          tool_choice: { oneOf: [{ type: 'string', enum: ['none', 'auto', 'required'] }, { type: 'object' }] },
          text: { type: 'object', properties: { format: { type: 'object' } } },
          max_output_tokens: { type: 'integer', minimum: 1 },
          temperature: { type: 'number', minimum: 0, maximum: 2 },
          top_p: { type: 'number', minimum: 0, maximum: 1 },
          parallel_tool_calls: { type: 'boolean' },
          reasoning: { type: 'object', properties: { effort: { type: 'string' }, summary: { type: 'string' } } },
          store: { type: 'boolean', default: true },
          stream: { type: 'boolean', default: false },
          metadata: { type: 'object', additionalProperties: { type: 'string' } },
          user: { type: 'string' },
          target_namespace: { type: 'string' },
        },
      },
      responses: { 200: ['The Response (or an event stream when `stream` is true)', 'Response'] },
    },
    {
      method: 'get',
      route: '/api/ai/responses/:id',
      tag: 'Chat',
      summary: 'A stored response; with `stream=true`, a background response\'s events',
      access: 'key',
      query: [
        { name: 'stream', schema: { type: 'string', enum: ['true', 'false'] }, description: 'A background response made with stream: true: its kept events, then the rest as they come' },
        { name: 'starting_after', schema: { type: 'integer', minimum: -1 }, description: 'The sequence_number of the last event received: the stream resumes after it' },
      ],
      responses: { 200: ['The Response as it was answered (or, with stream=true, an event stream)', 'Response'] },
    },
    {
      method: 'post',
      route: '/api/ai/responses/:id/cancel',
      tag: 'Chat',
      summary: 'Cancel a background response (charged only for what ran)',
      access: 'key',
      responses: { 200: ['The response, cancelled', 'Response'], 409: ['It already ended', 'Error'] },
    },
    { method: 'delete', route: '/api/ai/responses/:id', tag: 'Chat', summary: 'Delete a stored response', access: 'key', responses: { 200: ['Deleted', 'ResponseDeleted'] } },
    {
      method: 'post',
      route: '/api/anthropic/v1/messages',
      idempotent: true,
      tag: 'Chat',
      summary: "Create a message (Anthropic's Messages API: its SDK and Claude Code with ANTHROPIC_BASE_URL=<atelier>/api/anthropic)",
      access: 'key',
      errorShape: 'AnthropicError',
      description:
        'The key as `x-api-key` or `Authorization: Bearer`. Runs on the chat lifecycle (the same models, billing, limits, retries and fallbacks), translated to chat completions; usage is reported under /api/anthropic/v1/messages. ' +
        '`max_tokens` is a ceiling, lowered to what the model and its context window allow. ' +
        'With `stream: true`, a `text/event-stream` of `event: <type>` / `data: <event>` pairs in Anthropic\'s order (message_start, ping, content blocks, message_delta, message_stop), or an `error` event if the upstream breaks off. ' +
        'Errors use Anthropic\'s envelope; an upstream rate limiting every attempt is 529 overloaded_error. `?beta=true` is accepted. See docs/anthropic.md.',
      query: [{ name: 'beta', schema: { type: 'string' }, description: 'Sent by Claude Code; changes nothing' }],
      headers: [
        { name: 'anthropic-version', schema: { type: 'string' }, description: 'Accepted; the translation follows 2023-06-01' },
        { name: 'anthropic-beta', schema: { type: 'string' }, description: 'Accepted; betas without a chat counterpart change nothing' },
      ],
      body: fromZod(AnthropicMessagesRequest),
      responses: { 200: ['The Message (or an event stream when `stream` is true)', 'AnthropicMessage'] },
    },
    {
      method: 'post',
      route: '/api/anthropic/v1/messages/count_tokens',
      tag: 'Chat',
      summary: "Count a Messages request's input tokens (free; a read for rate limits)",
      access: 'key',
      errorShape: 'AnthropicError',
      body: fromZod(AnthropicCountTokensRequest),
      responses: { 200: ['The count', 'AnthropicTokenCount'] },
    },
    {
      method: 'get',
      route: '/api/anthropic/v1/models',
      tag: 'Chat',
      summary: "The chat models and their aliases, in Anthropic's list shape",
      access: 'key',
      errorShape: 'AnthropicError',
      query: [
        { name: 'limit', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 20 } },
        { name: 'after_id', schema: { type: 'string' }, description: 'A model id: the page after it' },
        { name: 'before_id', schema: { type: 'string' }, description: 'A model id: the page before it' },
      ],
      responses: { 200: ['A page of models', 'AnthropicModelList'] },
    },
    { method: 'get', route: '/api/anthropic/v1/models/:id', tag: 'Chat', summary: "A chat model or alias, in Anthropic's shape", access: 'key', errorShape: 'AnthropicError', responses: { 200: ['The model', 'AnthropicModel'] } },
    {
      method: 'get',
      route: '/api/ai/responses/:id/input_items',
      tag: 'Chat',
      summary: "A stored response's input items (its conversation before its output)",
      access: 'key',
      query: [
        { name: 'limit', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
        { name: 'order', schema: { type: 'string', enum: ['asc', 'desc'], default: 'desc' } },
        { name: 'after', schema: { type: 'string' }, description: 'An item id: the page after it' },
      ],
      responses: { 200: ['A page of items', 'ResponseInputItems'] },
    },
    {
      method: 'post',
      route: '/api/ai/files',
      tag: 'Batches',
      summary: "Upload a file (OpenAI's Files API, `client.files.create`)",
      access: 'key',
      description:
        "Streamed into the blob store, at most FILES_MAX_BYTES (200 MB). The caller's namespace's own: another namespace's file is a 404. " +
        'Kept FILES_TTL_DAYS, or `expires_after[seconds]` (1 hour to 30 days) from its creation.',
      bodyType: 'multipart/form-data',
      body: {
        type: 'object',
        required: ['file', 'purpose'],
        properties: {
          file: { type: 'string', contentMediaType: 'application/octet-stream' },
          purpose: { type: 'string', enum: [...FILE_PURPOSES] },
          'expires_after[anchor]': { type: 'string', enum: ['created_at'] },
          'expires_after[seconds]': { type: 'integer', minimum: 3600, maximum: 2592000 },
        },
      },
      responses: { 200: ['The file', 'FileObject'] },
    },
    {
      method: 'get',
      route: '/api/ai/files',
      tag: 'Batches',
      summary: "The namespace's files",
      access: 'key',
      query: [
        { name: 'purpose', schema: { type: 'string', enum: [...FILE_PURPOSES] } },
        { name: 'limit', schema: { type: 'integer', minimum: 1, maximum: 10000, default: 10000 } },
        { name: 'order', schema: { type: 'string', enum: ['asc', 'desc'], default: 'desc' } },
        { name: 'after', schema: { type: 'string' }, description: 'A file id: the page after it' },
      ],
      responses: { 200: ['A page of files', 'FileList'] },
    },
    { method: 'get', route: '/api/ai/files/:id', tag: 'Batches', summary: 'A file', access: 'key', responses: { 200: ['The file', 'FileObject'] } },
    {
      method: 'get',
      route: '/api/ai/files/:id/content',
      tag: 'Batches',
      summary: "A file's bytes",
      access: 'key',
      responses: { 200: ['The bytes', { type: 'string', contentMediaType: 'application/octet-stream' }, 'application/octet-stream'] },
    },
    { method: 'delete', route: '/api/ai/files/:id', tag: 'Batches', summary: 'Delete a file (its record, then its bytes)', access: 'key', responses: { 200: ['Deleted', 'FileDeleted'] } },
    {
      method: 'post',
      route: '/api/ai/batches',
      idempotent: true,
      tag: 'Batches',
      summary: "Create a batch (OpenAI's Batch API, `client.batches.create`)",
      access: 'key',
      description:
        'Answers at once with status `validating`; the queue-worker reads the input file (JSONL lines `{custom_id, method, url, body}`, at most 50,000), ' +
        "reserves the batch's estimate (each line's prompt plus max_tokens at the batch price: the model's batch_discount off) against credits and the key's budget, " +
        'and runs the lines in the namespace\'s fair share of the batch pool. A bad file ends `failed` with `errors.data`; a bad body fails its own line. docs/batches.md.',
      body: fromZod(CreateBatchRequest),
      responses: { 200: ['The batch', 'BatchObject'] },
    },
    {
      method: 'get',
      route: '/api/ai/batches',
      tag: 'Batches',
      summary: "The namespace's batches, newest first",
      access: 'key',
      query: [
        { name: 'limit', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
        { name: 'after', schema: { type: 'string' }, description: 'A batch id: the page after it' },
      ],
      responses: { 200: ['A page of batches', 'BatchList'] },
    },
    { method: 'get', route: '/api/ai/batches/:id', tag: 'Batches', summary: 'A batch, with its live request_counts and usage', access: 'key', responses: { 200: ['The batch', 'BatchObject'] } },
    {
      method: 'post',
      route: '/api/ai/batches/:id/cancel',
      tag: 'Batches',
      summary: 'Cancel a batch: `cancelling`, then `cancelled` once its running lines end (lines not started are dropped, uncharged)',
      access: 'key',
      responses: { 200: ['The batch', 'BatchObject'], 409: ['The batch already ended', 'Error'] },
    },
    {
      method: 'post',
      route: '/api/ai/embeddings',
      idempotent: true,
      tag: 'Chat',
      summary: 'Embeddings (OpenAI-compatible, `client.embeddings.create`)',
      access: 'key',
      description:
        '`input`: a string, up to 2,048 strings, token ids, or up to 2,048 arrays of token ids. `encoding_format` `base64` (little-endian float32; the SDKs\' default) or `float`. ' +
        'Billed per input token (the upstream\'s count, else atelier\'s o200k count), and counted under `tpm`. Usage is reported under /api/ai/embeddings.',
      body: modelsBody(catalog, ['/embeddings'], 'sync'),
      responses: { 200: ['The vectors, in input order', 'Embeddings'] },
    },
    ...(['/images/generate', '/images/edit', '/videos/generate'] as const).map(
      (endpoint): Operation => ({
        method: 'post',
        route: `/api/ai${endpoint}`,
        idempotent: true,
        tag: 'Media',
        summary: { '/images/generate': 'Generate images', '/images/edit': 'Edit images', '/videos/generate': 'Generate a video' }[endpoint],
        access: 'key',
        description: 'Synchronous: the request waits for the render (videos may take minutes; see the queue for long or batch work).',
        body: modelsBody(catalog, [endpoint], 'sync'),
        responses: { 200: ['The result', endpoint === '/videos/generate' ? 'VideoResult' : 'ImageResult'] },
      }),
    ),
    {
      method: 'post',
      idempotent: true,
      route: '/api/ai/images/generations',
      tag: 'Media',
      summary: "Generate images (OpenAI's Images API, `client.images.generate`)",
      access: 'key',
      description:
        'The same generation, billing and validation as /api/ai/images/generate, in OpenAI\'s shape: `n` is `num_images`, `size` (`WxH`) is width and height. ' +
        '`user`, `quality`, `style`, `background` and `moderation` are accepted and ignored.',
      body: {
        type: 'object',
        required: ['model', 'prompt'],
        properties: {
          model: { type: 'string', description: 'An image model of the catalog, e.g. local-image' },
          prompt: { type: 'string' },
          n: { type: 'integer', minimum: 1, maximum: 10, default: 1 },
          size: { type: 'string', pattern: '^(\\d+x\\d+|auto)$', examples: ['1024x1024'] },
          response_format: { type: 'string', enum: ['url', 'b64_json'], default: 'url' },
          output_format: { type: 'string', enum: ['png', 'jpeg', 'webp'] },
        },
      },
      responses: { 200: ['The images', 'OpenAiImages'] },
    },
    {
      method: 'post',
      route: '/api/ai/images/edits',
      tag: 'Media',
      summary: "Edit images (OpenAI's Images API, `client.images.edit`)",
      access: 'key',
      description:
        'The same edit, billing and validation as /api/ai/images/edit; the uploaded image goes to the model as its input_image. No mask. ' +
        'With an Idempotency-Key, a retry is compared by its fields and each image\'s bytes (SHA-256), whatever the form\'s boundary or field order.',
      idempotent: true,
      bodyType: 'multipart/form-data',
      body: {
        type: 'object',
        required: ['image', 'prompt', 'model'],
        properties: {
          image: { type: 'string', contentMediaType: 'application/octet-stream', description: "The image file ('image' or 'image[]', up to 4)" },
          prompt: { type: 'string' },
          model: { type: 'string', description: 'An image-editing model, e.g. local-image-edit' },
          n: { type: 'integer', minimum: 1, maximum: 10, default: 1 },
          size: { type: 'string' },
          response_format: { type: 'string', enum: ['url', 'b64_json'], default: 'url' },
        },
      },
      responses: { 200: ['The images', 'OpenAiImages'] },
    },
    {
      method: 'post',
      route: '/api/ai/queue',
      idempotent: true,
      tag: 'Queue',
      summary: 'Enqueue image or video generations',
      access: 'key',
      description:
        'Checked at enqueue: the model, num_generations, namespace and credits. Model parameters are checked when the generation runs. ' +
        'Optional `webhook` (absolute http(s) URL) and `webhook_events_filter` (`processing`, `completed`; default `["completed"]`): ' +
        'each selected transition is POSTed there as `{type, timestamp, data: <Generation>}`, signed (see GET /api/webhooks/default/secret), ' +
        'retried with backoff for up to 24 h.',
      body: modelsBody(catalog, ['/images/generate', '/images/edit', '/videos/generate'], 'queue'),
      responses: { 200: ['One queued record per generation', 'Enqueued'] },
    },
    {
      method: 'get',
      route: '/api/ai/queue',
      tag: 'Queue',
      summary: 'List generations (active ones unless `status` is given)',
      access: 'key',
      query: [
        { name: 'namespace', schema: { type: 'string' } },
        { name: 'model', schema: { type: 'string' } },
        {
          name: 'status',
          description: 'One status, several separated by commas (succeeded,failed), or all. Default: queued,processing.',
          schema: { type: 'string', pattern: '^(all|(queued|processing|succeeded|failed|cancelled)(,(queued|processing|succeeded|failed|cancelled))*)$' },
        },
        { name: 'media_type', schema: { type: 'string', enum: ['image', 'video'] } },
        { name: 'repo', schema: { type: 'string' } },
        { name: 'folder', schema: { type: 'string' } },
        ...page(100, 50),
      ],
      responses: { 200: ['Newest first', 'GenerationList'] },
    },
    { method: 'get', route: '/api/ai/queue/:id', tag: 'Queue', summary: 'A generation', access: 'key', responses: { 200: ['The record', 'Generation'] } },
    { method: 'delete', route: '/api/ai/queue/:id', tag: 'Queue', summary: 'Cancel a generation', access: 'key', responses: { 200: ['Cancelled, or already terminal (unchanged)', 'Cancelled'] } },
    {
      method: 'get',
      route: '/api/ai/queue/:id/webhooks',
      tag: 'Queue',
      summary: "Delivery attempts of a generation's webhook messages",
      access: 'key',
      responses: { 200: ['Oldest first', 'WebhookDeliveries'] },
    },
    {
      method: 'post',
      route: '/api/api_keys',
      tag: 'Credits',
      summary: 'Make an API key (shown once): name, billed namespace, scopes, expiry',
      access: 'key',
      description:
        'Needs a key without scopes. `namespace`: the caller\'s own (default) or an org they belong to; requests bill there by default. ' +
        `\`scopes\`: some of ${API_SCOPES.join(', ')} (absent: all); a request outside them is 403 naming the scope. ` +
        '`expires_at`: ISO 8601 or Unix seconds; after it the key gets 401 saying it expired. ' +
        '`limits`: `rpm` (requests that create work or charge), `read_rpm` (every other request: polls, lists, reads), `tpm` (chat tokens) and `max_concurrent` (requests in flight plus active generations), each at most the namespace\'s. ' +
        '`budget`: `{"max_spend": "<decimal>", "period": "day"|"month"|"total"}` (UTC calendar periods); a request that could take the key past it is 402 `Budget exceeded for key <prefix>` before any work. ' +
        'A key makes keys only at or below itself (403 naming what exceeds): limits and scopes at most its own (omitted: its own), expiry no later than its own, and, when it has a budget, a budget in the same period carved out of what it has left (its own max_spend goes down by as much). ' +
        "The new key's requests also count against the limits of the key that made it, and of that key's maker.",
      body: {
        type: 'object',
        required: ['name'],
        properties: API_KEY_FIELDS,
      },
      responses: { 201: ['The key; `api_key` is shown only here', 'CreatedSelfServiceKey'] },
    },
    {
      method: 'get',
      route: '/api/usage',
      tag: 'Credits',
      summary: 'Usage and spend of a namespace, grouped (JSON or CSV)',
      access: 'key',
      description:
        'Members of the namespace only. Counts every charged request (chat completions, image and video calls, generations) from the same records as the charges: ' +
        "the costs add up to the namespace's charges in [from, to). Requests released without a charge are not counted.",
      query: USAGE_QUERY,
      responses: { 200: ['The report (format=csv: its rows as text/csv)', 'UsageReport'] },
    },
    {
      method: 'delete',
      route: '/api/orgs/:org/membership',
      tag: 'Credits',
      summary: 'Leave an organization: your keys bound to it are revoked',
      access: 'key',
      description: 'Needs a key without scopes. 404 when you are not a member.',
      responses: { 200: ['No longer a member; `revoked_keys` lists the prefixes revoked', 'OrgMembership'] },
    },
    { method: 'get', route: '/api/api_keys', tag: 'Credits', summary: "The caller's keys (no secrets), with last_used_at", access: 'key', responses: { 200: ['Newest first', 'ApiKeyList'] } },
    {
      method: 'delete',
      route: '/api/api_keys/:prefix',
      tag: 'Credits',
      summary: "Revoke one of the caller's keys (every replica within a second)",
      access: 'key',
      responses: { 200: ['Revoked', 'RevokedApiKey'] },
    },
    {
      method: 'post',
      route: '/api/console/session',
      tag: 'Console',
      summary: 'Sign in to the web console: an API key and/or the admin token for an HttpOnly session cookie',
      access: 'public',
      description:
        'Answers 201 with `Set-Cookie: atelier_session=<opaque id>; Path=/; HttpOnly; SameSite=Lax` (plus `Secure` over https). The session lives in Redis with an idle and an absolute expiry ' +
        '(CONSOLE_SESSION_IDLE_MINUTES, CONSOLE_SESSION_MAX_HOURS) and authenticates every API route as the key would, with its scopes and limits, when no Authorization header is sent. ' +
        'Revoking the key ends its sessions. A cookie-authenticated POST, PUT, PATCH or DELETE from another Origin is 403. The key is never sent back.',
      body: fromZod(ConsoleSignInRequest),
      responses: { 201: ['Signed in', 'ConsoleSession'] },
    },
    {
      method: 'get',
      route: '/api/console/session',
      tag: 'Console',
      summary: 'Who the console session (cookie) is: user, namespace, scopes, operator',
      access: 'public',
      responses: { 200: ['The session', 'ConsoleSession'] },
    },
    { method: 'delete', route: '/api/console/session', tag: 'Console', summary: 'Sign out: the session is deleted server-side and the cookie cleared', access: 'public', responses: { 204: ['Signed out'] } },
    {
      method: 'get',
      route: '/console',
      tag: 'Console',
      summary: 'The web console (HTML, with a strict Content-Security-Policy)',
      access: 'public',
      responses: { 200: ['The page', { type: 'string' }, 'text/html'] },
    },
    {
      method: 'get',
      route: '/console/*',
      tag: 'Console',
      summary: "The console's assets (cached by content hash) and, for any other path, its page",
      access: 'public',
      responses: { 200: ['A file', { type: 'string' }, 'text/html'] },
    },
    {
      method: 'get',
      route: '/api/webhooks/default/secret',
      tag: 'Queue',
      summary: "The namespace's webhook signing secret (made on first read)",
      access: 'key',
      description:
        'Standard Webhooks: `whsec_` + base64 of 32 random bytes. Each delivery carries `webhook-id`, `webhook-timestamp` and ' +
        '`webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` keyed by the base64-decoded part.',
      query: [{ name: 'namespace', schema: { type: 'string' }, description: "Defaults to the caller's own" }],
      responses: { 200: ['The key', 'WebhookSecret'] },
    },
    {
      method: 'post',
      route: '/api/webhooks/default/secret/rotate',
      tag: 'Queue',
      summary: "Replace the namespace's webhook signing secret",
      access: 'key',
      query: [{ name: 'namespace', schema: { type: 'string' }, description: "Defaults to the caller's own" }],
      responses: { 200: ['The new key; signatures made with the old one stop verifying', 'WebhookSecret'] },
    },
    {
      method: 'get',
      route: '/api/events',
      tag: 'Queue',
      summary: 'Completion events (Server-Sent Events)',
      access: 'key',
      description:
        '`event: media_generation_completed`, then `data: {generation_id, status, media_type, model, url | error}`, then `id: <event id>`; `: keep-alive` every 15 s. ' +
        'Send `Last-Event-ID` to resume: the retained events after it come first (EVENTS_REPLAY_SECONDS, at most 1,000 per user), then live ones.',
      headers: [
        {
          name: 'Last-Event-ID',
          schema: { type: 'string', pattern: '^\\d+-\\d+$' },
          description: 'The id of the last event received; without it nothing is replayed (the contract default)',
        },
      ],
      responses: { 200: ['An event stream', { type: 'string' }, 'text/event-stream'] },
    },
    {
      method: 'get',
      route: '/api/ai/models',
      tag: 'Models',
      summary: 'List models',
      access: 'key',
      query: [
        { name: 'endpoint', schema: { type: 'string', enum: [...MODEL_ENDPOINTS] } },
        { name: 'input', schema: { type: 'string', enum: [...MODALITIES] } },
        { name: 'output', schema: { type: 'string', enum: [...MODALITIES] } },
      ],
      responses: { 200: ['The catalog, filtered', 'ModelList'] },
    },
    { method: 'get', route: '/api/ai/models/:id', tag: 'Models', summary: 'A model with its request schemas', access: 'key', responses: { 200: ['The model', 'Model'] } },
    {
      method: 'get',
      route: '/api/credits',
      tag: 'Credits',
      summary: 'Credits of a namespace you belong to',
      access: 'key',
      query: [{ name: 'namespace', schema: { type: 'string' }, description: 'Defaults to your own' }],
      responses: { 200: ['The balance', 'Credits'] },
    },
    { method: 'post', route: '/api/repos', tag: 'Repositories', summary: 'Create a repository', access: 'key', body: fromZod(CreateRepositoryRequest), responses: { 201: ['Created', 'RepositoryCreated'] } },
    {
      method: 'get',
      route: '/api/repos/:namespace/:repo',
      tag: 'Repositories',
      summary: 'A repository with the files of a branch',
      access: 'key',
      query: [{ name: 'branch', schema: { type: 'string', default: 'main' } }],
      responses: { 200: ['The repository', 'RepositoryAnswer'] },
    },
    { method: 'get', route: '/api/repos/:namespace/:repo/branches', tag: 'Repositories', summary: 'Branches', access: 'key', responses: { 200: ['The branches', 'BranchList'] } },
    {
      method: 'post',
      route: '/api/repos/:namespace/:repo/branches',
      tag: 'Repositories',
      summary: 'Create a branch',
      access: 'key',
      body: fromZod(CreateBranchRequest),
      responses: { 201: ['Created', 'BranchCreated'] },
    },
    {
      method: 'put',
      route: '/api/repos/:namespace/:repo/file/*',
      tag: 'Repositories',
      summary: 'Upload files into <branch>/<directory>',
      access: 'key',
      description: '`path` is `<branch>/<directory...>`; each part\'s filename is its name in that directory.',
      bodyType: 'multipart/form-data',
      body: {
        type: 'object',
        properties: {
          file: { type: 'string', contentMediaType: 'application/octet-stream' },
          'files[]': { type: 'array', items: { type: 'string', contentMediaType: 'application/octet-stream' } },
          message: { type: 'string' },
        },
      },
      responses: { 201: ['The commit (author by username)', 'Commit'] },
    },
    {
      method: 'get',
      route: '/api/repos/:namespace/:repo/file/*',
      tag: 'Repositories',
      summary: 'Download a file (`path` is `<branch>/<file path>`)',
      access: 'key',
      responses: { 200: ['The bytes', { type: 'string', contentMediaType: 'application/octet-stream' }, 'application/octet-stream'] },
    },
    {
      method: 'post',
      route: '/api/repos/:namespace/:repo/fine_tunes',
      idempotent: true,
      tag: 'Fine-tunes',
      summary: 'Create a fine-tune',
      access: 'key',
      description:
        'Every problem is reported at once: 400 with `error.detail` = `{fields: [{field, message}]}`. Defaults are filled in and returned. ' +
        'GET /api/fine_tunes/base_models lists the base models and training_params of each script type, with an example body.',
      body: createFineTuneJsonSchema(),
      bodyExamples: Object.fromEntries(SCRIPT_TYPES.map((t) => [t, { summary: t, value: exampleCreateBody(t) }])),
      responses: { 201: ['Created', 'FineTuneAnswer'] },
    },
    {
      method: 'get',
      route: '/api/fine_tunes/base_models',
      tag: 'Fine-tunes',
      summary: 'Base models, training_params and an example body, per script type',
      access: 'key',
      responses: { 200: ['One entry per script type', 'BaseModelListing'] },
    },
    {
      method: 'get',
      route: '/api/repos/:namespace/:repo/fine_tunes',
      tag: 'Fine-tunes',
      summary: 'List fine-tunes',
      access: 'key',
      query: [{ name: 'status', schema: { type: 'string', enum: [...FINE_TUNE_STATES] } }, ...page(100, 20)],
      responses: { 200: ['Newest first', 'FineTuneList'] },
    },
    { method: 'get', route: '/api/repos/:namespace/:repo/fine_tunes/:id', tag: 'Fine-tunes', summary: 'A fine-tune', access: 'key', responses: { 200: ['The fine-tune', 'FineTuneAnswer'] } },
    { method: 'delete', route: '/api/repos/:namespace/:repo/fine_tunes/:id', tag: 'Fine-tunes', summary: 'Delete a fine-tune (not while it runs)', access: 'key', responses: { 200: ['Deleted', 'FineTuneAnswer'] } },
    {
      method: 'post',
      route: '/api/repos/:namespace/:repo/fine_tunes/:id/tokenize',
      idempotent: true,
      tag: 'Fine-tunes',
      summary: 'Tokenize the dataset of a created fine-tune',
      access: 'key',
      responses: { 200: ['Tokenization started', 'FineTuneAnswer'] },
    },
    {
      method: 'post',
      route: '/api/repos/:namespace/:repo/fine_tunes/:id/actions/run',
      idempotent: true,
      tag: 'Fine-tunes',
      summary: 'Run a fine-tune: from tokenized, reserve its estimate and enqueue it; from created or tokenizing, once tokenized',
      access: 'key',
      description:
        'From `tokenized`: reserves `tokenization.estimated_cost` (402 without the credits) and answers `enqueued`. From `created` or `tokenizing`: ' +
        'answers with `run_requested: true`; tokenization is started if needed, and its end enqueues the run (or errors the fine-tune, naming the shortfall). ' +
        'Any other state: 409 `invalid_state`. Completion charges what the trainer trained, never more than the reservation; a failed run is not charged. ' +
        'With `webhook`, every transition after is POSTed there as `{type: "fine_tune.status", timestamp, data: <fine-tune>}`, signed like generations\' webhooks.',
      body: { type: 'object', properties: { webhook: { type: 'string', format: 'uri' } } },
      responses: { 200: ['The fine-tune', 'FineTuneAnswer'] },
    },
    {
      method: 'post',
      route: '/api/repos/:namespace/:repo/fine_tunes/:id/actions/stop',
      tag: 'Fine-tunes',
      summary: 'Stop a run: enqueued stops at once; running is told to its trainer, and shows stopped once the trainer confirms or its lease runs out',
      access: 'key',
      responses: { 200: ['The fine-tune', 'FineTuneAnswer'] },
    },
    {
      method: 'get',
      route: '/api/repos/:namespace/:repo/fine_tunes/:id/logs',
      tag: 'Fine-tunes',
      summary: "The trainer's log lines, metrics, phases and checkpoints, in order",
      access: 'key',
      query: [
        { name: 'after', schema: { type: 'integer', minimum: 0 }, description: 'Only entries after this id (next_after of the previous page)' },
        { name: 'limit', schema: { type: 'integer', minimum: 1, maximum: 5000, default: 500 } },
        { name: 'type', schema: { type: 'string', enum: ['log', 'metrics', 'status', 'checkpoint'] } },
      ],
      responses: { 200: ['The entries', 'FineTuneLogs'] },
    },
    {
      method: 'get',
      route: '/api/repos/:namespace/:repo/fine_tunes/:id/checkpoints',
      tag: 'Fine-tunes',
      summary: 'Sealed checkpoints by step, with their metrics and the model each one becomes when deployed',
      access: 'key',
      responses: { 200: ['The checkpoints', 'FineTuneCheckpoints'] },
    },
    {
      method: 'post',
      route: '/api/repos/:namespace/:repo/fine_tunes/:id/checkpoints/:step/deploy',
      idempotent: true,
      tag: 'Fine-tunes',
      summary: 'Deploy a checkpoint as the model `<fine_tune_name>-step-<step>`, callable by its namespace and members only',
      access: 'key',
      description:
        'Once the run has ended (completed or stopped; 409 otherwise). atelier/local-chat checkpoints are served by local-chat with their counts; other base models by ' +
        'a catalog model whose openai-compatible engine declares `lora_base_model` (the adapter is written under LORA_ADAPTER_DIR and loaded there); none: 409. ' +
        'Already deployed: 409 unless `?retry=true`. 404 for a step that was never sealed.',
      query: [{ name: 'retry', schema: { type: 'boolean' }, description: 'Deploy again (reload the adapter)' }],
      body: { type: 'object', properties: { deployment_type: { type: 'string', enum: ['fast', 'normal'], default: 'normal' } } },
      responses: { 200: ['The fine-tune (deployed) and the model', 'FineTuneDeployed'] },
    },
    {
      method: 'get',
      route: '/api/repos/:namespace/:repo/fine_tunes/:id/train_status',
      tag: 'Fine-tunes',
      summary: "The run's state, its current lease and the trainer's latest phase and metrics",
      access: 'key',
      responses: { 200: ['The status', 'TrainStatus'] },
    },
    ...(['/api/user/fine_tunes', '/api/orgs/:name/fine_tunes'] as const).map(
      (route): Operation => ({
        method: 'get',
        route,
        tag: 'Fine-tunes',
        summary: route.startsWith('/api/user') ? "Fine-tunes across the caller's own repositories" : "Fine-tunes across an organization's repositories (members only)",
        access: 'key',
        query: [
          { name: 'page', schema: { type: 'integer', minimum: 1, default: 1 } },
          { name: 'page_size', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
          { name: 'search', schema: { type: 'string' }, description: "In the fine-tune's or its repository's name, ignoring case" },
          { name: 'status', schema: { type: 'string', enum: [...FINE_TUNE_STATES] } },
          { name: 'created_by', schema: { type: 'string' }, description: 'A username' },
          { name: 'sort', schema: { type: 'string', enum: ['created_at', '-created_at', 'updated_at', '-updated_at', 'name', '-name'], default: '-created_at' } },
        ],
        responses: { 200: ['A page', 'FineTunePage'] },
      }),
    ),
    {
      method: 'post',
      route: '/api/trainer/lease',
      tag: 'Trainers',
      summary: 'Long-poll for a run of one of the trainer\'s base models: 200 with the lease, or 204 when none came within wait_seconds',
      access: 'trainer',
      body: { type: 'object', properties: { wait_seconds: { type: 'integer', minimum: 0, maximum: 30, default: 0 } } },
      responses: { 200: ['A lease', { type: 'object' }], 204: ['Nothing to run'] },
    },
    {
      method: 'post',
      route: '/api/trainer/leases/:lease/events',
      tag: 'Trainers',
      summary: 'Report log, metrics, checkpoint and status events (a heartbeat too); a repeated seq is ignored. Answers {cancel}',
      access: 'trainer',
      body: {
        type: 'object',
        required: ['events'],
        properties: { events: { type: 'array', maxItems: 500, items: { type: 'object', required: ['seq', 'type'], properties: { seq: { type: 'integer', minimum: 1 }, type: { type: 'string', enum: ['log', 'metrics', 'checkpoint', 'status'] } } } } },
      },
      responses: { 200: ['Applied', { type: 'object', properties: { cancel: { type: 'boolean' }, applied: { type: 'integer' } } }] },
    },
    {
      method: 'put',
      route: '/api/trainer/leases/:lease/checkpoints/:step/files/*',
      tag: 'Trainers',
      summary: 'Upload one file of a checkpoint (at most MAX_CHECKPOINT_BYTES); a checkpoint event seals the step',
      access: 'trainer',
      body: { type: 'string', contentMediaType: 'application/octet-stream' },
      bodyType: 'application/octet-stream',
      responses: { 201: ['Stored', { type: 'object', properties: { step: { type: 'integer' }, path: { type: 'string' }, size_bytes: { type: 'integer' }, sha256: { type: 'string' } } }] },
    },
    {
      method: 'post',
      route: '/api/trainer/leases/:lease/complete',
      tag: 'Trainers',
      summary: 'End the run (completed, or stopped after a cancel), charged the trained tokens or steps reported',
      access: 'trainer',
      body: { type: 'object', properties: { trained_tokens: { type: 'integer', minimum: 0 }, trained_steps: { type: 'integer', minimum: 0 }, final_step: { type: 'integer', minimum: 0 } } },
      responses: { 200: ['Ended', { type: 'object' }] },
    },
    {
      method: 'post',
      route: '/api/trainer/leases/:lease/fail',
      tag: 'Trainers',
      summary: 'End the run as errored; nothing is charged',
      access: 'trainer',
      body: { type: 'object', required: ['error'], properties: { error: { type: 'string' } } },
      responses: { 200: ['Ended', { type: 'object' }] },
    },
    {
      method: 'post',
      route: '/api/admin/trainers',
      tag: 'Operator',
      summary: "Create a trainer and its token (shown once), for the base models it serves; with namespaces, a team's trainer that leases only their runs",
      access: 'admin',
      body: {
        type: 'object',
        required: ['name', 'base_models'],
        properties: {
          name: { type: 'string' },
          base_models: { type: 'array', items: { type: 'string' } },
          namespaces: { type: 'array', items: { type: 'string' }, maxItems: 100, description: "The namespaces whose runs it may lease; omitted: every namespace (the operator's trainer)" },
        },
      },
      responses: { 201: ['Created', 'CreatedTrainer'] },
    },
    { method: 'get', route: '/api/admin/trainers', tag: 'Operator', summary: 'The trainers (without their tokens)', access: 'admin', responses: { 200: ['The trainers', 'TrainerList'] } },
    { method: 'delete', route: '/api/admin/trainers/:id', tag: 'Operator', summary: "Revoke a trainer's token (its leases run out and their runs go back to the queue)", access: 'admin', responses: { 200: ['Revoked', 'RevokedTrainer'] } },
    {
      method: 'get',
      route: '/files/*',
      tag: 'Files',
      summary: 'A result file behind a temporary signed link',
      access: 'public',
      query: [
        { name: 'expires', schema: { type: 'integer' } },
        { name: 'signature', schema: { type: 'string' } },
      ],
      responses: { 200: ['The bytes', { type: 'string', contentMediaType: 'application/octet-stream' }, 'application/octet-stream'] },
    },
    { method: 'post', route: '/api/admin/users', tag: 'Operator', summary: 'Create a user (with a key)', access: 'admin', body: fromZod(CreateUserRequest), responses: { 201: ['Created', 'CreatedUser'] } },
    {
      method: 'post',
      route: '/api/admin/users/:username/api_keys',
      tag: 'Operator',
      summary: 'Issue another API key, with the self-service fields (all optional here)',
      access: 'admin',
      body: {
        type: 'object',
        properties: API_KEY_FIELDS,
      },
      responses: { 201: ['Shown once', 'CreatedApiKey'] },
    },
    {
      method: 'get',
      route: '/api/admin/usage',
      tag: 'Operator',
      summary: 'Usage and spend over every namespace (or one), also groupable by namespace',
      access: 'admin',
      query: [{ name: 'namespace', schema: { type: 'string' } }, ...USAGE_QUERY.slice(1, 3), { name: 'group_by', schema: { type: 'string', enum: [...ADMIN_USAGE_GROUPS], default: 'day' } }, USAGE_QUERY[4], { ...USAGE_QUERY[5], schema: { type: 'string', enum: [...ADMIN_USAGE_GROUPS] } }],
      responses: { 200: ['The report', 'UsageReport'] },
    },
    { method: 'delete', route: '/api/admin/api_keys/:prefix', tag: 'Operator', summary: 'Revoke an API key', access: 'admin', responses: { 200: ['Revoked, with the keys made with it', 'RevokedApiKey'] } },
    { method: 'post', route: '/api/admin/orgs', tag: 'Operator', summary: 'Create an organization', access: 'admin', body: fromZod(CreateOrgRequest), responses: { 201: ['Created', 'CreatedOrg'] } },
    { method: 'put', route: '/api/admin/orgs/:org/members/:username', tag: 'Operator', summary: 'Add a user to an organization (idempotent)', access: 'admin', responses: { 200: ['A member', 'OrgMembership'] } },
    {
      method: 'delete',
      route: '/api/admin/orgs/:org/members/:username',
      tag: 'Operator',
      summary: "Remove a user from an organization and revoke the user's keys bound to it (every replica, at once)",
      access: 'admin',
      responses: { 200: ['No longer a member; `revoked_keys` lists the prefixes revoked', 'OrgMembership'] },
    },
    {
      method: 'get',
      route: '/api/admin/queues',
      tag: 'Operator',
      summary: "Each generation pool's backlog: queued and processing generations per namespace, most queued first, with each namespace's queue_weight",
      access: 'admin',
      responses: {
        200: [
          'The pools',
          {
            type: 'object',
            properties: {
              pools: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    pool: { type: 'string', enum: ['image', 'video'] },
                    queued: { type: 'integer' },
                    processing: { type: 'integer' },
                    namespaces: {
                      type: 'array',
                      items: { type: 'object', properties: { namespace: { type: 'string' }, queue_weight: { type: 'integer' }, queued: { type: 'integer' }, processing: { type: 'integer' } } },
                    },
                  },
                },
              },
            },
          },
        ],
      },
    },
    {
      method: 'put',
      route: '/api/admin/namespaces/:namespace/limits',
      tag: 'Operator',
      summary: "Set a namespace's work requests (rpm), other requests (read_rpm) and chat tokens (tpm) per minute, its work in flight (all its keys together; null: none) and its queue_weight (its share of queue workers while others wait, default 1); applied on every replica before it answers",
      access: 'admin',
      body: fromZod(NamespaceLimitsRequest),
      responses: { 200: ['The limits', 'NamespaceLimits'] },
    },
    {
      method: 'post',
      route: '/api/admin/namespaces/:namespace/credits',
      tag: 'Operator',
      summary: 'Grant (or, negative, remove) credits',
      access: 'admin',
      body: fromZod(AdjustCreditsRequest),
      responses: { 200: ['The new balance', 'CreditsAdjusted'] },
    },
    { method: 'get', route: '/api/admin/namespaces/:namespace', tag: 'Operator', summary: 'A namespace with its credits', access: 'admin', responses: { 200: ['The namespace', 'Namespace'] } },
    { method: 'get', route: '/health', tag: 'Operations', summary: 'Health of the service and its dependencies', access: 'public', responses: { 200: ['Healthy', 'Health'], 503: ['A dependency is down', 'Health'] } },
    {
      method: 'get',
      route: '/health/live',
      tag: 'Operations',
      summary: 'Liveness: the process answers (no dependency checks)',
      access: 'public',
      responses: { 200: ['Alive', 'Liveness'] },
    },
    {
      method: 'get',
      route: '/metrics',
      tag: 'Operations',
      summary: 'Prometheus metrics',
      access: 'public',
      description: 'Needs `Authorization: Bearer <METRICS_TOKEN>` when METRICS_TOKEN is set.',
      responses: { 200: ['Text exposition format', { type: 'string' }, 'text/plain'] },
    },
    {
      method: 'get',
      route: '/api/openapi.json',
      tag: 'Operations',
      summary: 'This document',
      access: 'public',
      responses: { 200: ['OpenAPI 3.1', { type: 'object' }] },
    },
  ];
}

const ERROR_STATUSES: Record<Access, number[]> = {
  key: [400, 401, 402, 403, 404, 409, 413, 415, 422, 502, 503, 504],
  admin: [400, 401, 404, 409],
  public: [403, 404],
  trainer: [400, 401, 404, 409, 413],
};

function withExamples(media: Schema, examples: Record<string, unknown> | undefined): Schema {
  if (!examples) return media;
  return Object.fromEntries(Object.entries(media).map(([type, m]) => [type, { ...(m as Schema), examples }]));
}

function content(schema: Schema | string | undefined, type = 'application/json'): Schema | undefined {
  if (schema === undefined) return undefined;
  return { [type]: { schema: typeof schema === 'string' ? { $ref: `#/components/schemas/${schema}` } : schema } };
}

export interface OpenApiOptions {
  catalog: ModelCatalog;
  /** The operator routes exist only when ADMIN_TOKEN is set. */
  adminEnabled: boolean;
  version: string;
  serverUrl?: string;
}

/**
 * The OpenAPI 3.1 description of the gateway. Request bodies come from the schemas the gateway
 * validates with (zod contracts, each catalog model's json_request_schema, the fine-tune tables),
 * so the description follows every change to them; a test checks that it lists every route.
 */
export function buildOpenApiDocument(opts: OpenApiOptions): Schema {
  const paths: Record<string, Record<string, Schema>> = {};
  for (const op of operations(opts.catalog)) {
    if (op.access === 'admin' && !opts.adminEnabled) continue;
    const path = openApiPath(op.route);
    const pathParams = [...path.matchAll(/\{(\w+)\}/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
      ...(m[1] === 'path' && { description: 'The rest of the path; may contain slashes' }),
    }));
    const responses: Record<string, Schema> = {};
    for (const [status, [description, schema, type]] of Object.entries(op.responses))
      responses[status] = { description, ...(schema !== undefined && { content: content(schema, type) }) };
    if (op.idempotent) for (const status of [409, 422]) responses[String(status)] ??= { description: 'Idempotency-Key in use (409) or reused (422)', content: content('Error') };
    for (const status of [...ERROR_STATUSES[op.access], ...(op.errorShape === 'AnthropicError' ? [429, 529] : [])])
      responses[String(status)] ??= { description: 'Error', content: content(op.errorShape ?? 'Error') };
    (paths[path] ??= {})[op.method] = {
      operationId: `${op.method}${path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
      tags: [op.tag],
      summary: op.summary,
      ...(op.description && { description: op.description }),
      security: op.access === 'public' ? [] : op.access === 'key' ? [{ apiKey: [] }, { xApiKey: [] }] : [{ [op.access === 'admin' ? 'adminToken' : 'trainerToken']: [] }],
      parameters: [...pathParams, ...(op.query ?? []).map((q) => ({ in: 'query', required: false, ...q })),
        ...(op.headers ?? []).map((h) => ({ in: 'header', required: false, ...h })),
        ...(op.idempotent ? [IDEMPOTENCY_KEY_PARAMETER] : [])],
      ...(op.body && { requestBody: { required: true, content: withExamples(content(op.body, op.bodyType)!, op.bodyExamples) } }),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'atelier API',
      version: opts.version,
      description: 'Chat completions, image and video generation, an asynchronous generation queue with completion events, models, repositories and fine-tunes.',
    },
    ...(opts.serverUrl && { servers: [{ url: opts.serverUrl }] }),
    security: [{ apiKey: [] }],
    tags: ['Chat', 'Learning', 'Media', 'Queue', 'Batches', 'Models', 'Credits', 'Repositories', 'Fine-tunes', 'Trainers', 'Files', 'Console', 'Operator', 'Operations'].map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer <API key>`' },
        xApiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: "The same API key as `x-api-key: <API key>` (what Anthropic's SDK and Claude Code send); used when there is no Authorization header" },
        adminToken: { type: 'http', scheme: 'bearer', description: 'The operator token (ADMIN_TOKEN)' },
        trainerToken: { type: 'http', scheme: 'bearer', description: 'A trainer token (`trn_...`, POST /api/admin/trainers): the /api/trainer routes only' },
      },
      schemas: responseSchemas(),
    },
  };
}
