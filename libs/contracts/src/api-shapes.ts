import { z } from 'zod';
import { ERROR_TYPES, type ErrorType } from './error-envelope';

/**
 * The answers of the public API, declared once. From these come the TypeScript types the services
 * and the console use (`z.infer`), the OpenAPI document's components (`API_SHAPES`, through
 * `z.toJSONSchema`), and the check every end-to-end test runs on every answer it gets (libs/testing's
 * TestHttp validates each one against the document, so a service that drifts from its shape fails CI).
 * Requests are described by their validators' own schemas (libs/openapi).
 */

const int = z.number().int();
const decimal = z.string().regex(/^-?\d+(\.\d+)?$/).describe('Exact decimal amount of credits');
const dateTime = z.iso.datetime({ offset: true });
const uuid = z.string().uuid();

/** Fine-tune states (docs/fine-tuning.md): created -> tokenizing -> tokenized | errored, then the run's. */
export const FINE_TUNE_STATES = ['created', 'tokenizing', 'tokenized', 'errored', 'enqueued', 'running', 'completed', 'stopped', 'deployed'] as const;
export const GENERATION_STATUSES = ['queued', 'processing', 'succeeded', 'failed', 'cancelled'] as const;
export const USAGE_GROUPS = ['model', 'api_key', 'day', 'endpoint'] as const;
/** The operator's report may also group by namespace. */
export const ADMIN_USAGE_GROUPS = [...USAGE_GROUPS, 'namespace'] as const;
export type UsageGroup = (typeof ADMIN_USAGE_GROUPS)[number];
/** What a self-service key may be limited to (its `scopes`); a key without scopes may use everything. */
export const API_SCOPES = ['chat', 'images', 'videos', 'queue', 'events', 'models', 'repos', 'fine_tunes', 'batches'] as const;
export type ApiScope = (typeof API_SCOPES)[number];
/** How a queued generation is ordered among its namespace's own (never against another namespace's). */
export const GENERATION_PRIORITIES = ['high', 'normal', 'low'] as const;

export const ErrorShape = z.object({
  error: z.object({
    type: z.enum(Object.keys(ERROR_TYPES) as [ErrorType, ...ErrorType[]]),
    title: z.string(),
    message: z.string(),
    detail: z.unknown().optional().describe('Per-field problems, when there are any'),
  }),
  status: z.literal('error'),
  status_message: z.enum(Object.keys(ERROR_TYPES) as [ErrorType, ...ErrorType[]]),
});

export const HealthShape = z.object({
  status: z.enum(['ok', 'error']),
  service: z.string(),
  checks: z.record(z.string(), z.object({ status: z.enum(['up', 'down']), latency_ms: int.optional(), error: z.string().optional() })),
});

export const CreditsShape = z.object({ namespace: z.string(), type: z.enum(['user', 'org']), credits: decimal, reserved: decimal, available: decimal });

export const ModelShape = z.object({
  id: z.string(),
  object: z.literal('model'),
  created: int,
  owned_by: z.string(),
  display_name: z.string().optional(),
  description: z.string().optional(),
  endpoint: z.enum(['/chat/completions', '/images/generate', '/images/edit', '/videos/generate', '/embeddings']),
  capabilities: z.object({ input: z.array(z.string()), output: z.array(z.string()) }),
  pricing: z.record(z.string(), z.unknown()),
  request_schema: z.record(z.string(), z.unknown()).describe('Model parameters with UI hints (x-order, basic, renderType)'),
  json_request_schema: z.record(z.string(), z.unknown()).describe('JSON Schema (2020-12) of the whole request body for this model'),
});
export const ModelListShape = z.object({ object: z.literal('list'), data: z.array(ModelShape) });

export const MediaItemShape = z.union([z.object({ url: z.url().describe('Temporary signed link') }), z.object({ b64_json: z.string() })]);
export const ImageResultShape = z.object({ model: z.string(), created: int, images: z.array(MediaItemShape), seed: int.optional() });
export const VideoResultShape = z.object({ model: z.string(), created: int, videos: z.array(MediaItemShape), seed: int.optional() });

/**
 * OpenAI's chat completion. Loose: an answer relayed from an OpenAI-compatible upstream keeps the
 * upstream's other fields (OpenAI adds some every year); the ones below are what atelier itself
 * guarantees, and OpenAI's usual extras are named.
 */
export const ChatCompletionShape = z.looseObject({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: int,
  model: z.string(),
  system_fingerprint: z.string().nullable().optional(),
  service_tier: z.string().nullable().optional(),
  choices: z.array(
    z.looseObject({
      index: int,
      message: z.looseObject({
        role: z.literal('assistant'),
        content: z.string().nullable(),
        refusal: z.string().nullable().optional(),
        tool_calls: z
          .array(z.object({ id: z.string(), index: int.optional(), type: z.literal('function'), function: z.object({ name: z.string(), arguments: z.string().describe('JSON') }) }))
          .optional(),
      }),
      logprobs: z.record(z.string(), z.unknown()).nullable().optional(),
      finish_reason: z.string().nullable(),
    }),
  ),
  usage: z.looseObject({ prompt_tokens: int, completion_tokens: int, total_tokens: int }),
});

const ItemShape = z.looseObject({ type: z.string(), id: z.string() });
export const ResponseShape = z.looseObject({
  id: z.string().regex(/^resp_/),
  object: z.literal('response'),
  created_at: int,
  status: z.enum(['completed', 'incomplete', 'failed', 'in_progress', 'queued', 'cancelled']).describe('queued and cancelled: background responses only'),
  model: z.string(),
  output: z
    .array(ItemShape)
    .describe('message items (output_text parts), function_call items (call_id, name, arguments, namespace) and custom_tool_call items (call_id, name, input)'),
  output_text: z.string().optional().describe("The output messages' text, concatenated"),
  previous_response_id: z.string().nullable().optional(),
  store: z.boolean().optional(),
  error: z.record(z.string(), z.unknown()).nullable().optional(),
  incomplete_details: z.record(z.string(), z.unknown()).nullable().optional(),
  usage: z.looseObject({ input_tokens: int, output_tokens: int, total_tokens: int }),
});
export const ResponseDeletedShape = z.object({ id: z.string(), object: z.literal('response'), deleted: z.literal(true) });
export const ResponseInputItemsShape = z.object({
  object: z.literal('list'),
  data: z.array(ItemShape),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
});

export const EmbeddingsShape = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({
      object: z.literal('embedding'),
      index: int,
      embedding: z.union([z.array(z.number()), z.string().describe('base64 of little-endian float32')]),
    }),
  ),
  model: z.string(),
  usage: z.object({ prompt_tokens: int, total_tokens: int }),
});

export const GenerationShape = z
  .object({
    generation_id: uuid,
    model_name: z.string(),
    prompt: z.string(),
    media_type: z.enum(['image', 'video']),
    status: z.enum(GENERATION_STATUSES),
    result_url: z.url().nullable(),
    error_message: z.string().nullable(),
    enqueued_at: int,
    started_at: int.nullable(),
    completed_at: int.nullable(),
    target_namespace: z.string(),
    target_repo: z.string().nullable(),
    target_directory: z.string().nullable(),
    cost: decimal.nullable().describe('Credits charged, once terminal ("0" when failed or cancelled); null while active'),
    queue_position: int.min(0).nullable().describe('While queued: how many generations of its pool run before it (0 = next); otherwise null'),
    progress: z
      .number()
      .min(0)
      .max(1)
      .nullable()
      .describe('While processing, when the engine reports it (steps, frames, the provider); 1 once succeeded; otherwise null'),
    priority: z.enum(GENERATION_PRIORITIES).describe("As enqueued (default normal): orders the namespace's own queued generations"),
  })
  .catchall(z.unknown().describe('Every other submitted parameter, echoed'));
export const GenerationListShape = z.object({ count: int, generations: z.array(GenerationShape), limit: int, offset: int });
export const EnqueuedShape = z.object({ generations: z.array(z.object({ generation_id: uuid, status: z.literal('queued') })) });
export const CancelledShape = z.object({ status: z.literal('success'), generation_id: uuid });

export const WebhookDeliveriesShape = z.object({
  deliveries: z.array(
    z.object({
      webhook_id: z.string(),
      type: z.enum(['generation.processing', 'generation.completed']),
      attempt: int,
      status_code: int.nullable(),
      error: z.string().nullable(),
      at: dateTime,
    }),
  ),
});
export const WebhookSecretShape = z.object({ key: z.string().regex(/^whsec_/) });

export const BaseModelListingShape = z.object({
  data: z.array(
    z.object({
      script_type: z.string(),
      base_models: z.array(z.string()),
      training_params_schema: z.record(z.string(), z.unknown()).describe('JSON Schema of training_params, with defaults and minimums'),
      example: z.record(z.string(), z.unknown()).describe('A create body for this script type'),
    }),
  ),
});

export const OpenAiImagesShape = z.object({ created: int, data: z.array(z.object({ url: z.url().optional(), b64_json: z.string().optional() })) });

const USAGE_FIGURES = {
  requests: int,
  input_tokens: int,
  output_tokens: int,
  images: int,
  video_seconds: z.number(),
  cost: z.string().describe('Decimal: exactly what was charged'),
};
export const UsageRowShape = z.object({ group: z.string().nullable(), split: z.string().nullable().optional(), ...USAGE_FIGURES });
export const UsageReportShape = z.object({
  namespace: z.string().nullable(),
  from: dateTime,
  to: dateTime,
  group_by: z.enum(ADMIN_USAGE_GROUPS),
  split_by: z.enum(ADMIN_USAGE_GROUPS).optional().describe('Present when asked: every row is one (group, split) pair'),
  rows: z.array(UsageRowShape),
  total: z.object(USAGE_FIGURES),
});

const API_KEY_VIEW = {
  prefix: z.string(),
  name: z.string().nullable(),
  namespace: z.string(),
  scopes: z.array(z.string()).nullable(),
  expires_at: dateTime.nullable(),
  limits: z.object({ rpm: int.optional(), read_rpm: int.optional(), tpm: int.optional(), max_concurrent: int.optional() }).nullable(),
  budget: z.object({ max_spend: z.string(), period: z.enum(['day', 'month', 'total']), spent: z.string() }).nullable(),
  store: z.boolean().describe("false: the key's requests are never stored (stored completions)"),
  created_at: dateTime,
  last_used_at: dateTime.nullable(),
};
export const ApiKeyShape = z.object(API_KEY_VIEW);
export const ApiKeyListShape = z.object({ data: z.array(ApiKeyShape) });
export const CreatedSelfServiceKeyShape = z.object({ api_key: z.string(), ...API_KEY_VIEW });
export const CreatedApiKeyShape = z.object({ api_key: z.string(), ...API_KEY_VIEW });
export const RevokedApiKeyShape = z.object({
  prefix: z.string(),
  revoked_at: int,
  revoked_keys: z.array(z.string()).optional().describe('Keys made with it (at any depth), revoked with it'),
});

/** The spec's success envelope on the repository and fine-tune routes. */
const SUCCESS = {
  status: z.literal('success'),
  status_message: z.enum(['resource_created', 'resource_found', 'resources_found', 'resource_updated', 'resource_deleted']),
};

export const BranchShape = z.object({ name: z.string(), head_commit_id: z.string().nullable(), created_at: int, updated_at: int });
export const RepositoryFileShape = z.object({
  path: z.string(),
  size: int,
  sha256: z.string(),
  content_type: z.string(),
  commit_id: z.string().nullable(),
  updated_at: int,
});
export const RepositoryShape = z.object({
  namespace: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  created_at: int,
  branches: z.array(BranchShape),
  branch: z.string().describe('The branch whose files are listed'),
  files: z.array(RepositoryFileShape),
});
export const RepositoryAnswerShape = z.object({ repository: RepositoryShape });
export const RepositoryCreatedShape = z.object({ repository: RepositoryShape, ...SUCCESS });
export const BranchListShape = z.object({ branches: z.array(BranchShape) });
export const BranchCreatedShape = z.object({ branch: BranchShape, ...SUCCESS });
export const CommitFileShape = z.object({ path: z.string(), size: int, sha256: z.string(), content_type: z.string() });
export const CommitViewShape = z.object({
  id: z.string(),
  branch: z.string(),
  message: z.string(),
  author: z.string().describe('The uploader'),
  timestamp: int,
  files: z.array(CommitFileShape),
});
export const CommitShape = z.object({ commit: CommitViewShape, ...SUCCESS });

export const FineTuneShape = z.object({
  id: z.string(),
  name: z.string().nullable().optional(),
  namespace: z.string(),
  repo_name: z.string(),
  resource: z.string(),
  base_model: z.string(),
  script_type: z.string(),
  training_params: z.record(z.string(), z.unknown()),
  status: z.enum(FINE_TUNE_STATES),
  error: z.string().nullable().optional(),
  tokenization: z.record(z.string(), z.unknown()).nullable().optional(),
  credits_used: decimal.nullable().optional().describe('Credits charged once the run ended ("0" when released)'),
  trained_tokens: int.nullable().optional(),
  trained_steps: int.nullable().optional(),
  attempt: int.optional().describe('Leases given out for the run so far'),
  run_requested: z.boolean().optional().describe('A run was asked for while it was created or tokenizing'),
  stop_requested: z.boolean().optional(),
  enqueued_at: int.nullable().optional(),
  started_at: int.nullable().optional(),
  finished_at: int.nullable().optional(),
  created_at: int.optional(),
  updated_at: int.optional(),
});
export const FineTuneAnswerShape = z.object({ fine_tune: FineTuneShape, ...SUCCESS });
export const CheckpointShape = z.object({
  step: int,
  path: z.string(),
  files: z.array(z.string()),
  size_bytes: int,
  created_at: int,
  metrics: z.object(Object.fromEntries(['loss', 'grad_norm', 'learning_rate', 'epoch', 'mean_token_accuracy'].map((k) => [k, z.number().nullable().optional()]))).nullable(),
  model_name: z.string(),
  model_id: z.string().nullable(),
  deployment_status: z.enum(['not_deployed', 'deployed', 'failed']),
});
export const FineTuneCheckpointsShape = z.object({ fine_tune_id: z.string(), branch: z.string().nullable(), total_checkpoints: int, checkpoints: z.array(CheckpointShape), ...SUCCESS });
export const FineTuneListShape = z.object({ fine_tunes: z.array(FineTuneShape), total: int, limit: int, offset: int, ...SUCCESS });

export const CreatedUserShape = z.object({ username: z.string(), namespace: z.string(), api_key: z.string() });
export const CreatedOrgShape = z.object({ name: z.string(), namespace: z.string(), members: z.array(z.string()), credits: decimal });
export const OrgMembershipShape = z.object({ org: z.string(), username: z.string(), member: z.boolean(), revoked_keys: z.array(z.string()) });
export const NamespaceShape = z.object({ namespace: z.string(), type: z.enum(['user', 'org']), credits: decimal, reserved: decimal });

export const FineTunePageShape = z.object({ fine_tunes: z.array(FineTuneShape), total: int, page: int, page_size: int, ...SUCCESS });
export const FineTuneLogEntryShape = z.looseObject({ id: z.union([int, z.string()]), type: z.string(), created_at: z.union([int, z.string()]) });
export const FineTuneLogsShape = z.object({ fine_tune_id: z.string(), logs: z.array(FineTuneLogEntryShape), next_after: int.nullable(), ...SUCCESS });

export const ConsoleSessionShape = z.object({
  username: z.string().nullable(),
  namespace: z.string().nullable(),
  key_prefix: z.string().nullable(),
  scopes: z.array(z.string()),
  operator: z.boolean(),
  expires_at: int.describe('Unix seconds: the absolute expiry'),
});

export const FineTuneDeployedShape = z.object({ fine_tune: FineTuneShape, model: z.record(z.string(), z.unknown()).describe('The model it became'), ...SUCCESS });
export const TrainStatusShape = z.object({
  fine_tune_id: z.string(),
  fine_tune_status: z.enum(FINE_TUNE_STATES).describe('Not `status`: that is the envelope\'s'),
  attempt: int,
  stop_requested: z.boolean(),
  phase: z.string().nullable(),
  step: int.nullable(),
  metrics: z.record(z.string(), z.unknown()).nullable(),
  lease: z.object({ id: z.string(), trainer: z.string(), attempt: int, state: z.string(), heartbeat_at: int.nullable() }).nullable(),
  ...SUCCESS,
});

export const TrainerShape = z.object({
  id: z.string(),
  name: z.string(),
  base_models: z.array(z.string()),
  namespaces: z.array(z.string()).nullable().describe('The namespaces whose runs it may lease; null: every namespace'),
  builtin: z.boolean(),
  created_at: int,
});
export const CreatedTrainerShape = z.object({ ...TrainerShape.shape, token: z.string().regex(/^trn_/).describe('Shown only here') });
export const TrainerListShape = z.object({ trainers: z.array(TrainerShape) });
export const RevokedTrainerShape = z.object({ id: z.string(), revoked: z.literal(true) });

export const NamespaceLimitsShape = z.object({ namespace: z.string(), limits: z.record(z.string(), z.unknown()) });
export const CreditsAdjustedShape = z.object({ namespace: z.string(), credits: decimal });
export const LivenessShape = z.object({ status: z.literal('ok'), service: z.string() });

/** Anthropic's Messages API (/api/anthropic/v1): its own shapes, which its SDK and Claude Code parse. */
export const ANTHROPIC_STOP_REASONS = ['end_turn', 'max_tokens', 'stop_sequence', 'tool_use', 'pause_turn', 'refusal'] as const;
export const AnthropicUsageShape = z.object({
  input_tokens: int.describe('Input tokens not read from or written to a cache'),
  output_tokens: int,
  cache_creation_input_tokens: int,
  cache_read_input_tokens: int,
});
export const AnthropicMessageShape = z.object({
  id: z.string().regex(/^msg_/),
  type: z.literal('message'),
  role: z.literal('assistant'),
  model: z.string(),
  content: z.array(
    z.union([
      z.object({ type: z.literal('text'), text: z.string() }),
      z.object({ type: z.literal('tool_use'), id: z.string(), name: z.string(), input: z.record(z.string(), z.unknown()) }),
      z.object({ type: z.literal('thinking'), thinking: z.string(), signature: z.string() }),
    ]),
  ),
  stop_reason: z.enum(ANTHROPIC_STOP_REASONS).nullable(),
  stop_sequence: z.string().nullable(),
  usage: AnthropicUsageShape,
});
export type AnthropicMessage = z.infer<typeof AnthropicMessageShape>;
export const AnthropicModelShape = z.object({ type: z.literal('model'), id: z.string(), display_name: z.string(), created_at: dateTime });
export const AnthropicModelListShape = z.object({ data: z.array(AnthropicModelShape), has_more: z.boolean(), first_id: z.string().nullable(), last_id: z.string().nullable() });
export type AnthropicModel = z.infer<typeof AnthropicModelShape>;
export const ANTHROPIC_ERROR_TYPES = [
  'invalid_request_error', 'authentication_error', 'billing_error', 'permission_error', 'not_found_error', 'request_too_large',
  'rate_limit_error', 'api_error', 'overloaded_error', 'timeout_error',
] as const;
export const AnthropicErrorShape = z.object({
  type: z.literal('error'),
  error: z.object({ type: z.enum(ANTHROPIC_ERROR_TYPES), message: z.string() }),
  request_id: z.string(),
});
export type AnthropicErrorBody = z.infer<typeof AnthropicErrorShape>;
export const AnthropicTokenCountShape = z.object({ input_tokens: int });

/** OpenAI's Files API (/api/ai/files), for batches: what a file may be for. */
export const FILE_PURPOSES = ['batch', 'user_data'] as const;
export const FileObjectShape = z.object({
  id: z.string().regex(/^file-/),
  object: z.literal('file'),
  bytes: int,
  created_at: int,
  filename: z.string(),
  purpose: z.enum([...FILE_PURPOSES, 'batch_output']).describe("batch_output: a batch's output or error file, written by atelier"),
  expires_at: int.nullable(),
  status: z.literal('processed').describe("Deprecated by OpenAI; always 'processed'"),
  status_details: z.null(),
});
export type FileObject = z.infer<typeof FileObjectShape>;
export const FileListShape = z.object({ object: z.literal('list'), data: z.array(FileObjectShape), first_id: z.string().nullable(), last_id: z.string().nullable(), has_more: z.boolean() });
export const FileDeletedShape = z.object({ id: z.string(), object: z.literal('file'), deleted: z.literal(true) });

/** OpenAI's Batch API (/api/ai/batches): a batch's states, in OpenAI's words. */
export const BATCH_STATUSES = ['validating', 'failed', 'in_progress', 'finalizing', 'completed', 'expired', 'cancelling', 'cancelled'] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];
export const BatchErrorShape = z.object({ code: z.string(), message: z.string(), line: int.nullable(), param: z.string().nullable() });
export const BatchObjectShape = z.object({
  id: z.string().regex(/^batch_/),
  object: z.literal('batch'),
  endpoint: z.string(),
  model: z.string().nullable().describe('The model the lines name, when they all name one'),
  errors: z.object({ object: z.literal('list'), data: z.array(BatchErrorShape) }).nullable(),
  input_file_id: z.string(),
  completion_window: z.string(),
  status: z.enum(BATCH_STATUSES),
  output_file_id: z.string().nullable(),
  error_file_id: z.string().nullable(),
  created_at: int,
  in_progress_at: int.nullable(),
  expires_at: int.nullable(),
  finalizing_at: int.nullable(),
  completed_at: int.nullable(),
  failed_at: int.nullable(),
  expired_at: int.nullable(),
  cancelling_at: int.nullable(),
  cancelled_at: int.nullable(),
  request_counts: z.object({ total: int, completed: int, failed: int }).describe('Live while the batch runs'),
  usage: z.object({
    input_tokens: int,
    input_tokens_details: z.object({ cached_tokens: int }),
    output_tokens: int,
    output_tokens_details: z.object({ reasoning_tokens: int }),
    total_tokens: int,
  }),
  metadata: z.record(z.string(), z.string()).nullable(),
});
export type BatchObject = z.infer<typeof BatchObjectShape>;
export const BatchListShape = z.object({ object: z.literal('list'), data: z.array(BatchObjectShape), first_id: z.string().nullable(), last_id: z.string().nullable(), has_more: z.boolean() });
export type BatchList = z.infer<typeof BatchListShape>;

export const FeedbackShape = z.object({
  id: z.string(),
  object: z.literal('feedback'),
  target_id: z.string(),
  metric: z.string(),
  value: z.number().describe('A boolean metric keeps 1 (true) or 0 (false)'),
  comment: z.string().nullable(),
  created_at: int,
});
export const FeedbackListShape = z.object({ object: z.literal('list'), data: z.array(FeedbackShape) });
export const FeedbackMetricShape = z.object({
  id: z.string(),
  object: z.literal('feedback_metric'),
  name: z.string(),
  type: z.enum(['boolean', 'float']),
  optimize: z.enum(['max', 'min']),
  namespace: z.string(),
  created_at: int,
});
export const FeedbackMetricListShape = z.object({ object: z.literal('list'), data: z.array(FeedbackMetricShape) });
export const StoredCompletionShape = ChatCompletionShape.extend({
  metadata: z.record(z.string(), z.string()),
  request_id: z.string().nullable().optional(),
  feedback: z.array(FeedbackShape).describe("atelier's: the feedback given on it, oldest first"),
});
export const StoredCompletionListShape = z.object({
  object: z.literal('list'),
  data: z.array(StoredCompletionShape),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
});
export const StoredMessageShape = z.looseObject({ id: z.string(), role: z.string(), content: z.unknown() });
export const StoredMessageListShape = z.object({
  object: z.literal('list'),
  data: z.array(StoredMessageShape),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
});
export const StoredCompletionDeletedShape = z.object({ id: z.string(), object: z.literal('chat.completion.deleted'), deleted: z.literal(true) });
export const CompletionExportShape = z.object({
  id: z.string().describe('export_<32 hex>'),
  object: z.literal('chat.completion.export'),
  status: z.enum(['queued', 'running', 'completed', 'failed']),
  namespace: z.string(),
  repo: z.string(),
  path: z.string(),
  branch: z.string(),
  filter: z.record(z.string(), z.unknown()),
  progress: z.object({ rows: int, skipped: int, total: int }).describe('Rows written and completions left out so far, of the matching total when it was queued'),
  rows: int,
  skipped: int,
  commit: z.record(z.string(), z.unknown()).nullable(),
  error: z.string().nullable(),
  created_at: int,
  started_at: int.nullable(),
  ended_at: int.nullable(),
});
const ExperimentVariantShape = z.object({ model: z.string(), weight: z.number().describe('Share of the requests, the variants together 1') });
export const ExperimentShape = z.object({
  id: z.string(),
  object: z.literal('experiment'),
  name: z.string().describe('A model id of its namespace'),
  namespace: z.string(),
  mode: z.enum(['fixed', 'adaptive']),
  metric: z.string().nullable(),
  sticky_by: z.string().nullable(),
  min_weight: z.number(),
  status: z.enum(['running', 'promoted']),
  promoted_model: z.string().nullable(),
  variants: z.array(ExperimentVariantShape),
  created_at: int,
  updated_at: int,
});
export const ExperimentListShape = z.object({ object: z.literal('list'), data: z.array(ExperimentShape) });
export const ExperimentDetailShape = ExperimentShape.extend({
  variants: z.array(
    ExperimentVariantShape.extend({
      requests: int,
      failed: int,
      latency_ms: z.object({ p50: z.number().nullable(), p95: z.number().nullable() }).describe('Of the requests that succeeded'),
      cost: z.object({ total: z.string(), per_request: z.string().nullable() }),
      metric: z
        .object({ count: int, mean: z.number().nullable(), ci95: z.tuple([z.number(), z.number()]).nullable() })
        .nullable()
        .describe("The experiment's metric on this variant's answers (the latest feedback per answer), with a 95 % interval: Wilson's for a boolean metric, the normal one for a float"),
    }),
  ),
  history: z.array(
    z.object({
      type: z.enum(['created', 'weights', 'promoted']),
      variants: z.array(ExperimentVariantShape),
      model: z.string().optional(),
      created_at: int,
    }),
  ),
});
export const ExperimentDeletedShape = z.object({ id: z.string(), object: z.literal('experiment.deleted'), name: z.string(), deleted: z.literal(true) });

/** Every documented answer by its OpenAPI component name (`#/components/schemas/<name>`). */
export const API_SHAPES = {
  Error: ErrorShape,
  Health: HealthShape,
  Credits: CreditsShape,
  Model: ModelShape,
  ModelList: ModelListShape,
  MediaItem: MediaItemShape,
  ImageResult: ImageResultShape,
  VideoResult: VideoResultShape,
  ChatCompletion: ChatCompletionShape,
  Response: ResponseShape,
  ResponseDeleted: ResponseDeletedShape,
  StoredCompletion: StoredCompletionShape,
  StoredCompletionList: StoredCompletionListShape,
  StoredMessageList: StoredMessageListShape,
  StoredCompletionDeleted: StoredCompletionDeletedShape,
  Feedback: FeedbackShape,
  FeedbackList: FeedbackListShape,
  FeedbackMetric: FeedbackMetricShape,
  FeedbackMetricList: FeedbackMetricListShape,
  CompletionExport: CompletionExportShape,
  Experiment: ExperimentShape,
  ExperimentList: ExperimentListShape,
  ExperimentDetail: ExperimentDetailShape,
  ExperimentDeleted: ExperimentDeletedShape,
  ResponseInputItems: ResponseInputItemsShape,
  Embeddings: EmbeddingsShape,
  Generation: GenerationShape,
  WebhookDeliveries: WebhookDeliveriesShape,
  BaseModelListing: BaseModelListingShape,
  OpenAiImages: OpenAiImagesShape,
  UsageRow: UsageRowShape,
  UsageReport: UsageReportShape,
  ApiKey: ApiKeyShape,
  ApiKeyList: ApiKeyListShape,
  CreatedSelfServiceKey: CreatedSelfServiceKeyShape,
  RevokedApiKey: RevokedApiKeyShape,
  WebhookSecret: WebhookSecretShape,
  GenerationList: GenerationListShape,
  Enqueued: EnqueuedShape,
  Cancelled: CancelledShape,
  RepositoryFile: RepositoryFileShape,
  Repository: RepositoryShape,
  RepositoryAnswer: RepositoryAnswerShape,
  RepositoryCreated: RepositoryCreatedShape,
  Branch: BranchShape,
  BranchList: BranchListShape,
  BranchCreated: BranchCreatedShape,
  CommitFile: CommitFileShape,
  CommitView: CommitViewShape,
  Commit: CommitShape,
  FineTune: FineTuneShape,
  FineTuneAnswer: FineTuneAnswerShape,
  Checkpoint: CheckpointShape,
  FineTuneCheckpoints: FineTuneCheckpointsShape,
  FineTuneList: FineTuneListShape,
  FineTunePage: FineTunePageShape,
  FineTuneLogEntry: FineTuneLogEntryShape,
  FineTuneLogs: FineTuneLogsShape,
  ConsoleSession: ConsoleSessionShape,
  FineTuneDeployed: FineTuneDeployedShape,
  TrainStatus: TrainStatusShape,
  Trainer: TrainerShape,
  CreatedTrainer: CreatedTrainerShape,
  TrainerList: TrainerListShape,
  RevokedTrainer: RevokedTrainerShape,
  NamespaceLimits: NamespaceLimitsShape,
  CreditsAdjusted: CreditsAdjustedShape,
  Liveness: LivenessShape,
  CreatedUser: CreatedUserShape,
  CreatedApiKey: CreatedApiKeyShape,
  CreatedOrg: CreatedOrgShape,
  OrgMembership: OrgMembershipShape,
  Namespace: NamespaceShape,
  AnthropicUsage: AnthropicUsageShape,
  AnthropicMessage: AnthropicMessageShape,
  AnthropicModel: AnthropicModelShape,
  AnthropicModelList: AnthropicModelListShape,
  AnthropicError: AnthropicErrorShape,
  AnthropicTokenCount: AnthropicTokenCountShape,
  FileObject: FileObjectShape,
  FileList: FileListShape,
  FileDeleted: FileDeletedShape,
  BatchObject: BatchObjectShape,
  BatchList: BatchListShape,
} as const;

export type ErrorBody = z.infer<typeof ErrorShape>;
export type Credits = z.infer<typeof CreditsShape>;
export type ModelSummary = z.infer<typeof ModelShape>;
export type ChatCompletion = z.infer<typeof ChatCompletionShape>;
export type Generation = z.infer<typeof GenerationShape>;
export type GenerationList = z.infer<typeof GenerationListShape>;
export type WebhookDeliveries = z.infer<typeof WebhookDeliveriesShape>;
export type UsageRow = z.infer<typeof UsageRowShape>;
export type UsageReport = z.infer<typeof UsageReportShape>;
export type ApiKeyView = z.infer<typeof ApiKeyShape>;
export type FineTuneView = z.infer<typeof FineTuneShape>;
export type FineTuneList = z.infer<typeof FineTuneListShape>;
export type CheckpointView = z.infer<typeof CheckpointShape>;
export type FineTuneCheckpoints = z.infer<typeof FineTuneCheckpointsShape>;
export type FineTunePage = z.infer<typeof FineTunePageShape>;
export type FineTuneLogEntry = z.infer<typeof FineTuneLogEntryShape>;
export type ConsoleSession = z.infer<typeof ConsoleSessionShape>;
export type BranchView = z.infer<typeof BranchShape>;
export type RepositoryFileView = z.infer<typeof RepositoryFileShape>;
export type RepositoryView = z.infer<typeof RepositoryShape>;
export type CommitFileView = z.infer<typeof CommitFileShape>;
export type CommitView = z.infer<typeof CommitViewShape>;
export type TrainerView = z.infer<typeof TrainerShape>;
export type CreatedTrainer = z.infer<typeof CreatedTrainerShape>;
export type TrainStatus = z.infer<typeof TrainStatusShape>;
export type UsageFigures = UsageReport['total'];
export type StoredCompletionView = z.infer<typeof StoredCompletionShape>;
export type StoredCompletionList = z.infer<typeof StoredCompletionListShape>;
export type FeedbackMetricView = z.infer<typeof FeedbackMetricShape>;
export type ExperimentView = z.infer<typeof ExperimentShape>;
export type ExperimentDetail = z.infer<typeof ExperimentDetailShape>;
export type CompletionExportView = z.infer<typeof CompletionExportShape>;
