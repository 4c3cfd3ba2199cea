import { ERROR_TYPES } from '@atelier/contracts';
import { FINE_TUNE_STATES } from '@atelier/fine-tune';

/**
 * Response shapes. Requests are described by the validators' own schemas (see
 * openapi-document.ts); answers are written here from the records the services build.
 */
type Schema = Record<string, unknown>;

const str: Schema = { type: 'string' };
const int: Schema = { type: 'integer' };
const decimal: Schema = { type: 'string', pattern: '^-?\\d+(\\.\\d+)?$', description: 'Exact decimal amount of credits' };
const nullable = (s: Schema): Schema => ({ anyOf: [s, { type: 'null' }] });
const obj = (properties: Record<string, Schema>, required: string[] = Object.keys(properties), extra: Schema = {}): Schema => ({
  type: 'object',
  required,
  properties,
  ...extra,
});
const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });

const errorTypes = Object.keys(ERROR_TYPES);

/** A self-service API key as listed (and, with `api_key`, as made). */
const API_KEY_VIEW: Record<string, Schema> = {
  prefix: str,
  name: nullable(str),
  namespace: str,
  scopes: nullable({ type: 'array', items: str }),
  expires_at: nullable({ type: 'string', format: 'date-time' }),
  limits: nullable({ type: 'object', properties: { rpm: int, read_rpm: int, tpm: int, max_concurrent: int } }),
  budget: nullable(obj({ max_spend: str, period: { type: 'string', enum: ['day', 'month', 'total'] }, spent: str }, ['max_spend', 'period', 'spent'])),
  created_at: { type: 'string', format: 'date-time' },
  last_used_at: nullable({ type: 'string', format: 'date-time' }),
};

const USAGE_FIGURES: Record<string, Schema> = {
  requests: int,
  input_tokens: int,
  output_tokens: int,
  images: int,
  video_seconds: { type: 'number' },
  cost: { type: 'string', description: 'Decimal: exactly what was charged' },
};

export const RESPONSE_SCHEMAS: Record<string, Schema> = {
  Error: obj({
    error: obj(
      { type: { type: 'string', enum: errorTypes }, title: str, message: str, detail: { description: 'Per-field problems, when there are any' } },
      ['type', 'title', 'message'],
    ),
    status: { const: 'error' },
    status_message: { type: 'string', enum: errorTypes },
  }),
  Health: obj({
    status: { type: 'string', enum: ['ok', 'error'] },
    service: str,
    checks: { type: 'object', additionalProperties: obj({ status: { type: 'string', enum: ['up', 'down'] }, latency_ms: int, error: str }, ['status']) },
  }),
  Credits: obj({ namespace: str, type: { type: 'string', enum: ['user', 'org'] }, credits: decimal, reserved: decimal, available: decimal }),
  Model: obj(
    {
      id: str,
      object: { const: 'model' },
      created: int,
      owned_by: str,
      display_name: str,
      description: str,
      endpoint: { type: 'string', enum: ['/chat/completions', '/images/generate', '/images/edit', '/videos/generate', '/embeddings'] },
      capabilities: obj({ input: { type: 'array', items: str }, output: { type: 'array', items: str } }),
      pricing: { type: 'object' },
      request_schema: { type: 'object', description: 'Model parameters with UI hints (x-order, basic, renderType)' },
      json_request_schema: { type: 'object', description: 'JSON Schema (2020-12) of the whole request body for this model' },
    },
    ['id', 'object', 'created', 'owned_by', 'endpoint', 'capabilities', 'pricing', 'request_schema', 'json_request_schema'],
  ),
  ModelList: obj({ object: { const: 'list' }, data: { type: 'array', items: ref('Model') } }),
  MediaItem: { type: 'object', oneOf: [obj({ url: { type: 'string', format: 'uri', description: 'Temporary signed link' } }), obj({ b64_json: str })] },
  ImageResult: obj({ model: str, created: int, images: { type: 'array', items: ref('MediaItem') }, seed: int }, ['model', 'created', 'images']),
  VideoResult: obj({ model: str, created: int, videos: { type: 'array', items: ref('MediaItem') }, seed: int }, ['model', 'created', 'videos']),
  ChatCompletion: obj(
    {
      id: str,
      object: { const: 'chat.completion' },
      created: int,
      model: str,
      choices: {
        type: 'array',
        items: obj(
          {
            index: int,
            message: obj(
              {
                role: { const: 'assistant' },
                content: nullable(str),
                tool_calls: {
                  type: 'array',
                  items: obj({ id: str, index: int, type: { const: 'function' }, function: obj({ name: str, arguments: { type: 'string', description: 'JSON' } }) }, [
                    'id',
                    'type',
                    'function',
                  ]),
                },
              },
              ['role', 'content'],
            ),
            finish_reason: nullable(str),
          },
          ['index', 'message', 'finish_reason'],
        ),
      },
      usage: obj({ prompt_tokens: int, completion_tokens: int, total_tokens: int }),
    },
    ['id', 'object', 'created', 'model', 'choices', 'usage'],
  ),
  Response: obj(
    {
      id: { type: 'string', pattern: '^resp_' },
      object: { const: 'response' },
      created_at: int,
      status: { type: 'string', enum: ['completed', 'incomplete', 'failed', 'in_progress'] },
      model: str,
      output: {
        type: 'array',
        description: 'message items (output_text parts), function_call items (call_id, name, arguments, namespace) and custom_tool_call items (call_id, name, input)',
        items: obj({ type: str, id: str }, ['type', 'id'], { additionalProperties: true }),
      },
      output_text: { type: 'string', description: "The output messages' text, concatenated" },
      previous_response_id: nullable(str),
      store: { type: 'boolean' },
      error: nullable({ type: 'object' }),
      incomplete_details: nullable({ type: 'object' }),
      usage: obj({ input_tokens: int, output_tokens: int, total_tokens: int }, ['input_tokens', 'output_tokens', 'total_tokens'], { additionalProperties: true }),
    },
    ['id', 'object', 'created_at', 'status', 'model', 'output', 'usage'],
    { additionalProperties: true },
  ),
  ResponseDeleted: obj({ id: str, object: { const: 'response' }, deleted: { const: true } }),
  ResponseInputItems: obj({
    object: { const: 'list' },
    data: { type: 'array', items: obj({ type: str, id: str }, ['type', 'id'], { additionalProperties: true }) },
    first_id: nullable(str),
    last_id: nullable(str),
    has_more: { type: 'boolean' },
  }),
  Embeddings: obj({
    object: { const: 'list' },
    data: {
      type: 'array',
      items: obj({
        object: { const: 'embedding' },
        index: int,
        embedding: { oneOf: [{ type: 'array', items: { type: 'number' } }, { type: 'string', description: 'base64 of little-endian float32' }] },
      }),
    },
    model: str,
    usage: obj({ prompt_tokens: int, total_tokens: int }),
  }),
  Generation: obj(
    {
      generation_id: { type: 'string', format: 'uuid' },
      model_name: str,
      prompt: str,
      media_type: { type: 'string', enum: ['image', 'video'] },
      status: { type: 'string', enum: ['queued', 'processing', 'succeeded', 'failed', 'cancelled'] },
      result_url: nullable({ type: 'string', format: 'uri' }),
      error_message: nullable(str),
      enqueued_at: int,
      started_at: nullable(int),
      completed_at: nullable(int),
      target_namespace: str,
      target_repo: nullable(str),
      target_directory: nullable(str),
      cost: { ...nullable(decimal), description: 'Credits charged, once terminal ("0" when failed or cancelled); null while active' },
      queue_position: { ...nullable({ type: 'integer', minimum: 0 }), description: 'While queued: how many generations of its pool run before it (0 = next); otherwise null' },
      progress: { ...nullable({ type: 'number', minimum: 0, maximum: 1 }), description: 'While processing, when the engine reports it (steps, frames, the provider); 1 once succeeded; otherwise null' },
      priority: { type: 'string', enum: ['high', 'normal', 'low'], description: "As enqueued (default normal): orders the namespace's own queued generations" },
    },
    ['generation_id', 'model_name', 'prompt', 'media_type', 'status', 'result_url', 'error_message', 'enqueued_at', 'started_at', 'completed_at'],
    { additionalProperties: { description: 'Every other submitted parameter, echoed' } },
  ),
  WebhookDeliveries: obj({
    deliveries: {
      type: 'array',
      items: obj(
        {
          webhook_id: str,
          type: { type: 'string', enum: ['generation.processing', 'generation.completed'] },
          attempt: int,
          status_code: nullable(int),
          error: nullable(str),
          at: { type: 'string', format: 'date-time' },
        },
        ['webhook_id', 'type', 'attempt', 'status_code', 'error', 'at'],
      ),
    },
  }),
  BaseModelListing: obj({
    data: {
      type: 'array',
      items: obj({
        script_type: str,
        base_models: { type: 'array', items: str },
        training_params_schema: { type: 'object', description: 'JSON Schema of training_params, with defaults and minimums' },
        example: { type: 'object', description: 'A create body for this script type' },
      }),
    },
  }),
  OpenAiImages: obj({
    created: int,
    data: { type: 'array', items: { type: 'object', properties: { url: { type: 'string', format: 'uri' }, b64_json: str } } },
  }),
  UsageReport: obj(
    {
      namespace: nullable(str),
      from: { type: 'string', format: 'date-time' },
      to: { type: 'string', format: 'date-time' },
      group_by: { type: 'string', enum: ['model', 'api_key', 'day', 'endpoint', 'namespace'] },
      rows: { type: 'array', items: obj({ group: nullable(str), ...USAGE_FIGURES }) },
      total: obj(USAGE_FIGURES),
    },
    ['namespace', 'from', 'to', 'rows', 'total'],
  ),
  ApiKeyList: obj({ data: { type: 'array', items: obj(API_KEY_VIEW) } }),
  CreatedSelfServiceKey: obj({ api_key: str, ...API_KEY_VIEW }),
  RevokedApiKey: obj({ prefix: str, revoked_at: int, revoked_keys: { type: 'array', items: str, description: 'Keys made with it (at any depth), revoked with it' } }, ['prefix', 'revoked_at']),
  WebhookSecret: obj({ key: { type: 'string', pattern: '^whsec_' } }, ['key']),
  GenerationList: obj({ count: int, generations: { type: 'array', items: ref('Generation') }, limit: int, offset: int }),
  Enqueued: obj({ generations: { type: 'array', items: obj({ generation_id: { type: 'string', format: 'uuid' }, status: { const: 'queued' } }) } }),
  Cancelled: obj({ status: { const: 'success' }, generation_id: { type: 'string', format: 'uuid' } }),
  RepositoryFile: obj({ path: str, size: int, sha256: str, content_type: str, commit_id: str, updated_at: int }, ['path', 'size', 'sha256']),
  Repository: obj(
    {
      namespace: str,
      name: str,
      description: nullable(str),
      created_at: int,
      branches: { type: 'array', items: str },
      branch: str,
      files: { type: 'array', items: ref('RepositoryFile') },
    },
    ['namespace', 'name'],
  ),
  RepositoryAnswer: obj({ repository: ref('Repository') }, ['repository']),
  Branch: { type: 'object', properties: { name: str } },
  BranchList: obj({ branches: { type: 'array', items: ref('Branch') } }),
  Commit: obj({ commit: obj({ id: str, branch: str, message: nullable(str), author: str, timestamp: int, files: { type: 'array', items: ref('RepositoryFile') } }, ['id', 'branch', 'files']) }, ['commit']),
  FineTune: obj(
    {
      id: str,
      name: nullable(str),
      namespace: str,
      repo_name: str,
      resource: str,
      base_model: str,
      script_type: str,
      training_params: { type: 'object' },
      status: { type: 'string', enum: [...FINE_TUNE_STATES] },
      error: nullable(str),
      tokenization: nullable({ type: 'object' }),
      credits_used: { ...nullable(decimal), description: 'Credits charged once the run ended ("0" when released)' },
      trained_tokens: nullable(int),
      trained_steps: nullable(int),
      attempt: { ...int, description: 'Leases given out for the run so far' },
      run_requested: { type: 'boolean', description: 'A run was asked for while it was created or tokenizing' },
      stop_requested: { type: 'boolean' },
      enqueued_at: nullable(int),
      started_at: nullable(int),
      finished_at: nullable(int),
      created_at: int,
      updated_at: int,
    },
    ['id', 'namespace', 'repo_name', 'resource', 'base_model', 'script_type', 'training_params', 'status'],
  ),
  FineTuneAnswer: obj({ fine_tune: ref('FineTune'), status: str, status_message: str }, ['fine_tune']),
  FineTuneCheckpoints: obj({
    fine_tune_id: str,
    branch: nullable(str),
    total_checkpoints: int,
    checkpoints: {
      type: 'array',
      items: obj({
        step: int,
        path: str,
        files: { type: 'array', items: str },
        size_bytes: int,
        created_at: int,
        metrics: { type: 'object', properties: Object.fromEntries(['loss', 'grad_norm', 'learning_rate', 'epoch', 'mean_token_accuracy'].map((k) => [k, nullable({ type: 'number' })])) },
        model_name: str,
        model_id: nullable(str),
        deployment_status: { type: 'string', enum: ['not_deployed', 'deployed', 'failed'] },
      }),
    },
  }),
  FineTuneList: obj({ fine_tunes: { type: 'array', items: ref('FineTune') }, total: int, limit: int, offset: int }, ['fine_tunes', 'total', 'limit', 'offset']),
  CreatedUser: obj({ username: str, namespace: str, api_key: str }),
  CreatedApiKey: obj({ api_key: str, ...API_KEY_VIEW }),
  CreatedOrg: obj({ name: str, namespace: str, members: { type: 'array', items: str }, credits: decimal }),
  OrgMembership: obj({ org: str, username: str, member: { type: 'boolean' }, revoked_keys: { type: 'array', items: str } }),
  Namespace: obj({ namespace: str, type: { type: 'string', enum: ['user', 'org'] }, credits: decimal, reserved: decimal }),
};
