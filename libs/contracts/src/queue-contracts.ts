/**
 * Every BullMQ queue atelier uses: its name, job payload, result and settings, together.
 * Work that must happen once travels as a job on one of these queues (competing consumers);
 * broadcasts use the pub/sub channels in broadcast-channels.ts instead.
 */

/** Settings every queue must spell out; leaving one out is a compile error. */
export interface QueueSettings {
  /** Attempts before the job is failed for good (1 = no retry). */
  readonly attempts: number;
  readonly backoff: { readonly type: 'fixed' | 'exponential'; readonly delay: number };
  /** Jobs handled in parallel by one process. */
  readonly concurrency: number;
  /** Bounded retention: completed jobs are dropped quickly, failed ones kept for inspection. */
  readonly removeOnComplete: { readonly count: number; readonly age: number };
  readonly removeOnFail: { readonly count: number; readonly age: number };
  /** How long a worker may hold a job without renewing its lock before it counts as stalled. */
  readonly lockDurationMs: number;
  /** Request/response queues: the caller waits for the result over a reply channel. */
  readonly kind: 'rpc' | 'work';
}

export interface QueueContract<TName extends string = string, TPayload = unknown, TResult = unknown> {
  readonly name: TName;
  readonly settings: QueueSettings;
  /** Type carriers only; never read at run time. */
  readonly __payload?: TPayload;
  readonly __result?: TResult;
}

export type PayloadOf<Q> = Q extends QueueContract<string, infer P, unknown> ? P : never;
export type ResultOf<Q> = Q extends QueueContract<string, unknown, infer R> ? R : never;

export function defineQueue<TPayload, TResult = void>() {
  return <TName extends string>(name: TName, settings: QueueSettings): QueueContract<TName, TPayload, TResult> =>
    Object.freeze({ name, settings: Object.freeze(settings) });
}

const DAY = 24 * 3600;

/** Who asked: carried by every job so services bill and authorize without re-authenticating. */
export interface CallerContext {
  userId: string;
  username: string;
  /** The namespace billed and written to (caller's own or target_namespace). */
  namespaceId: string;
  namespace: string;
  requestId: string;
}

/** What the gateway counted while validating a chat body, so the chat service need not count again. */
export interface ChatTokenLimits {
  /** o200k count of the prompt (messages and tools). */
  promptTokens: number;
  /** The completion limit: the caller's, else the model default, bounded by the context window. */
  maxTokens: number;
  /** Whether the caller set the limit. */
  maxTokensExplicit: boolean;
}

/** What a deployed fine-tune adds to the catalog model serving it (DeployedModels). */
export type ChatModelAdapter = { kind: 'ngram'; key: string } | { kind: 'lora'; name: string };
/** A deployed atelier/local-image checkpoint: the blob key of its learned style (ImageStyle). */
export type MediaModelAdapter = { kind: 'style'; key: string };

export interface ChatCompletionJob {
  caller: CallerContext;
  /** The catalog model that serves the request (for a deployed fine-tune, its serving model). */
  model: string;
  /** A deployed fine-tune: the name the caller asked for and answers carry, and its adapter. */
  deployed?: { name: string; adapter: ChatModelAdapter };
  /** The OpenAI-style request body, already validated against the model's schema (defaults filled in). */
  body: Record<string, unknown>;
  limits: ChatTokenLimits;
  /**
   * A Responses API request for a model whose upstream speaks it natively (its engine's
   * responses_api): sent to `{base_url}/responses` as it is, instead of `body` (which the gateway
   * validated and counted). Streamed chunks are then Responses events, and `completion` a Response.
   */
  responses?: Record<string, unknown>;
  /**
   * An Anthropic Messages request for a model whose engine is `anthropic`: sent to
   * `{base_url}/messages` as it is (with `anthropicBeta` as its anthropic-beta header), instead of
   * `body`. Streamed chunks are then Anthropic's events, and `completion` a Message.
   */
  messages?: Record<string, unknown>;
  anthropicBeta?: string;
  reservationId: string;
  /** chatcmpl-... id chosen by the gateway, so the reservation and the usage record name it too. */
  completionId: string;
}

/**
 * What the chat service answers. Streamed chunks travel before it on the reply channel as
 * serialized chat.completion.chunk strings; the last of them carries the usage.
 */
export interface ChatCompletionOutcome {
  /** The chat.completion object; null when the answer was streamed. */
  completion: Record<string, unknown> | null;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  /** Which engine or upstream server answered (after retries and fallbacks). */
  provider: string;
}

export interface EmbeddingsJob {
  caller: CallerContext;
  model: string;
  /** Texts, or token id arrays, validated by the gateway: at most MAX_EMBEDDING_INPUTS. */
  input: string[] | number[][];
  /** Shorter vectors, where the model supports it. */
  dimensions?: number;
  /** o200k count of each input, which the gateway reserved credits for: the usage when an upstream reports none. */
  inputTokens: number;
  reservationId: string;
}

export interface EmbeddingsOutcome {
  /** One vector per input, in input order: little-endian float32, base64 (compact over Redis, and exact). */
  vectors: string[];
  usage: { prompt_tokens: number; total_tokens: number };
  provider: string;
}

/** Where outputs are stored: always under the billed namespace, optionally in a repo/directory. */
export interface MediaOutputTarget {
  repo?: string;
  directory?: string;
}

export interface MediaRenderJob {
  caller: CallerContext;
  /** The catalog model that renders (for a deployed fine-tune, its serving model). */
  model: string;
  /** A deployed fine-tune: the name answers carry, and its adapter. */
  deployed?: { name: string; adapter: MediaModelAdapter };
  /** The request body, already validated against the model's json_request_schema (defaults filled). */
  params: Record<string, unknown>;
  target?: MediaOutputTarget;
}

/** One stored output; the bytes stay in blob storage (never in Redis). */
export interface MediaRenderOutput {
  key: string;
  contentType: string;
  size: number;
  width?: number;
  height?: number;
  durationSeconds?: number;
}

export interface MediaRenderResult {
  model: string;
  created: number;
  outputs: MediaRenderOutput[];
  /** The seed used (random when the request gave none). */
  seed?: number;
  /** What is billed: images made, or seconds of video made. */
  usage: { images: number; videoSeconds: number };
  /** Time spent in the engine, for the overhead measurement of the sync path. */
  engineMs: number;
}

export interface GenerationJob {
  generationId: string;
  requestId: string;
  /** Whose generation it is (the share cap); absent on jobs added before it was carried. */
  namespaceId?: string;
}

/** One attempt to deliver one webhook message (a generation's transition). */
export interface WebhookDeliveryJob {
  /** Standard Webhooks' webhook-id: one per message, the same on every attempt. */
  webhookId: string;
  /** What the message is about: a generation, or a fine-tune (fineTuneId, type fine_tune.status). */
  generationId?: string;
  fineTuneId?: string;
  /** ... or a batch (type batch.status). */
  batchId?: string;
  /** Whose webhook secret signs it. */
  namespaceId: string;
  type: 'generation.processing' | 'generation.completed' | 'fine_tune.status' | 'batch.status';
  url: string;
  /** The message body's `timestamp` (ISO 8601), when the transition happened. */
  timestamp: string;
  /** The Generation record at the transition, as GET /api/ai/queue/:id returned it then. */
  data: Record<string, unknown>;
  /** 1-based. */
  attempt: number;
  requestId: string;
}

export interface FineTuneTokenizeJob {
  fineTuneId: string;
  requestId: string;
}

/** A fine-tune's dataset to inspect before the fine-tune is created: a Parquet file of a repository's branch. */
export interface DatasetInspectJob {
  repository: { id: string; namespace: string; name: string };
  branch: string;
  path: string;
  requestId: string;
}

/** Its columns and rows, or why it cannot be a dataset (missing, not Parquet, past a DATASET_* limit). */
export type DatasetInspection = { columns: string[]; rows: number } | { problem: string };

export const CHAT_COMPLETION_QUEUE = defineQueue<ChatCompletionJob, ChatCompletionOutcome>()('chat-completion', {
  kind: 'rpc',
  // Retries happen inside the chat service (per upstream, before the first byte), not by re-running the job.
  attempts: 1,
  backoff: { type: 'fixed', delay: 0 },
  // Chat jobs mostly wait on upstream servers, so one process keeps many in flight.
  concurrency: 256,
  // The answer already went back over the reply channel; finished jobs are kept only briefly.
  removeOnComplete: { count: 100, age: 600 },
  removeOnFail: { count: 5000, age: 7 * DAY },
  lockDurationMs: 30_000,
});

/** Embeddings, run by the chat service (model serving) beside chat completions. */
export const EMBEDDINGS_QUEUE = defineQueue<EmbeddingsJob, EmbeddingsOutcome>()('embeddings', {
  kind: 'rpc',
  // Retries and fallbacks happen inside the chat service, per upstream call.
  attempts: 1,
  backoff: { type: 'fixed', delay: 0 },
  concurrency: 64,
  removeOnComplete: { count: 100, age: 600 },
  removeOnFail: { count: 5000, age: 7 * DAY },
  lockDurationMs: 30_000,
});

/**
 * Synchronous media renders, images and videos on separate queues (and workers) so a
 * ten-minute video never holds up an image. Attempts 1: the caller is waiting and a retry
 * would run (and bill) the generation twice; the gateway reports the failure instead.
 */
const RENDER_SETTINGS = {
  kind: 'rpc',
  attempts: 1,
  backoff: { type: 'fixed', delay: 0 },
  removeOnComplete: { count: 1000, age: 3600 },
  removeOnFail: { count: 5000, age: 7 * DAY },
} as const;

export const IMAGE_RENDER_QUEUE = defineQueue<MediaRenderJob, MediaRenderResult>()('media-render-image', {
  ...RENDER_SETTINGS,
  concurrency: 4,
  lockDurationMs: 30_000,
});

export const VIDEO_RENDER_QUEUE = defineQueue<MediaRenderJob, MediaRenderResult>()('media-render-video', {
  ...RENDER_SETTINGS,
  // Local video encoding is CPU-bound (ffmpeg); more in parallel would only slow each one down.
  concurrency: 2,
  // BullMQ renews the lock while the job runs (ffmpeg is a child process, the event loop stays free).
  lockDurationMs: 60_000,
});

/** Queued generations, images and videos on separate queues so each pool scales on its own. */
const GENERATION_SETTINGS = {
  kind: 'work',
  // Retries cover crashed or stalled workers; a generation that fails for a reason of its own
  // is marked failed by the handler and not retried.
  attempts: 3,
  backoff: { type: 'exponential', delay: 2_000 },
  removeOnComplete: { count: 1000, age: DAY },
  removeOnFail: { count: 5000, age: 14 * DAY },
} as const;

export const IMAGE_GENERATION_QUEUE = defineQueue<GenerationJob>()('generation-image', {
  ...GENERATION_SETTINGS,
  concurrency: 4,
  lockDurationMs: 30_000,
});

export const VIDEO_GENERATION_QUEUE = defineQueue<GenerationJob>()('generation-video', {
  ...GENERATION_SETTINGS,
  concurrency: 2,
  lockDurationMs: 60_000,
});

/**
 * Webhook deliveries. Attempts 1: each retry is a job of its own, added by the handler with the
 * delay WEBHOOK_RETRY_DELAYS_MS gives it (plus jitter), so the schedule can span a day and
 * every attempt is recorded. A worker that dies mid-attempt has it re-run (stalled-job check).
 */
export const WEBHOOK_DELIVERY_QUEUE = defineQueue<WebhookDeliveryJob>()('webhook-delivery', {
  kind: 'work',
  attempts: 1,
  backoff: { type: 'fixed', delay: 0 },
  // Deliveries wait on receivers (up to 10 s each), not on the CPU.
  concurrency: 32,
  removeOnComplete: { count: 1000, age: DAY },
  removeOnFail: { count: 5000, age: 14 * DAY },
  lockDurationMs: 30_000,
});

export const FINE_TUNE_TOKENIZE_QUEUE = defineQueue<FineTuneTokenizeJob>()('fine-tune-tokenize', {
  kind: 'work',
  attempts: 3,
  backoff: { type: 'exponential', delay: 5_000 },
  concurrency: 2,
  removeOnComplete: { count: 1000, age: DAY },
  removeOnFail: { count: 5000, age: 14 * DAY },
  lockDurationMs: 120_000,
});

/**
 * A dataset's footer read and judged for the gateway's create (columns, rows), in the fine-tune
 * service: decoding a Parquet footer is the dataset's author's to size, and it must not run on the
 * gateway's event loop. Attempts 1: the caller is waiting, and asking again is cheap.
 */
export const FINE_TUNE_INSPECT_QUEUE = defineQueue<DatasetInspectJob, DatasetInspection>()('fine-tune-inspect', {
  kind: 'rpc',
  attempts: 1,
  backoff: { type: 'fixed', delay: 0 },
  concurrency: 4,
  removeOnComplete: { count: 100, age: 600 },
  removeOnFail: { count: 1000, age: 7 * DAY },
  lockDurationMs: 30_000,
});

/** A batch's own steps: reading and checking its input file (then reserving and queueing its lines), and writing its output files. */
export interface BatchStepJob {
  batchId: string;
  step: 'validate' | 'finalize';
  requestId: string;
}

/** One line of a batch, run in its namespace's fair share of the batch pool. */
export interface BatchLineJob {
  batchId: string;
  lineId: string;
  namespaceId: string;
  requestId: string;
}

/**
 * A batch's steps. Attempts 3: a worker that dies mid-step has the step re-run, and each step
 * is safe to repeat (the batch's status guards it).
 */
export const BATCH_STEP_QUEUE = defineQueue<BatchStepJob>()('batch-step', {
  kind: 'work',
  attempts: 3,
  backoff: { type: 'exponential', delay: 2_000 },
  concurrency: 2,
  removeOnComplete: { count: 1000, age: DAY },
  removeOnFail: { count: 5000, age: 14 * DAY },
  // A 50,000-line file is read and reserved in one step.
  lockDurationMs: 120_000,
});

/**
 * Batch lines: the batch pool, below interactive work. Its concurrency (BATCH_WORKER_CONCURRENCY
 * per queue-worker) bounds how many of the model servers' slots batches take; lines wait in the
 * fair order across namespaces (QueuePositions' `batch` pool). Attempts 3 cover a dead worker; a
 * line's own failure is its answer, not retried.
 */
export const BATCH_LINE_QUEUE = defineQueue<BatchLineJob>()('batch-line', {
  kind: 'work',
  attempts: 3,
  backoff: { type: 'exponential', delay: 1_000 },
  concurrency: 8,
  removeOnComplete: { count: 1000, age: 3600 },
  removeOnFail: { count: 5000, age: 14 * DAY },
  lockDurationMs: 60_000,
});

/**
 * A Responses API request sent with `background: true`: run off the request that made it, by
 * whichever gateway takes the job. `caller` is the authenticated caller as the gateway saw it
 * (libs/auth's Caller: its limits, budget and scopes), so the run is billed and limited exactly as
 * the request would have been.
 */
export interface BackgroundResponseJob {
  responseId: string;
  caller: Readonly<Record<string, unknown>>;
  /** The request body, without `background`. */
  body: Record<string, unknown>;
  requestId: string;
}

/**
 * Background responses, run by the gateways (the Responses API's code lives there). Attempts 3:
 * a gateway that dies mid-run has the response run again by another (its stream goes on after
 * what it kept); a response's own failure is its answer, not retried.
 */
export const RESPONSE_BACKGROUND_QUEUE = defineQueue<BackgroundResponseJob>()('response-background', {
  kind: 'work',
  attempts: 3,
  backoff: { type: 'fixed', delay: 1_000 },
  // They wait on the chat service, not on the gateway's CPU.
  concurrency: 32,
  removeOnComplete: { count: 1000, age: DAY },
  removeOnFail: { count: 5000, age: 14 * DAY },
  lockDurationMs: 60_000,
});

/** A queued export of stored completions (its row in completion_exports holds the request). */
export interface CompletionExportJob {
  exportId: string;
  requestId: string;
}

/**
 * Exports of stored completions to a repo, past the in-request bound (or asked for in the
 * background), run by the gateways (the repos code lives there). Attempts 3: a gateway that dies
 * mid-export has it run again from the start by another; one that died after the commit only
 * publishes the event it owed.
 */
export const COMPLETION_EXPORT_QUEUE = defineQueue<CompletionExportJob>()('completion-export', {
  kind: 'work',
  attempts: 3,
  backoff: { type: 'fixed', delay: 2_000 },
  // Each holds a page of completions and a Parquet row group in memory.
  concurrency: 2,
  removeOnComplete: { count: 1000, age: DAY },
  removeOnFail: { count: 5000, age: 14 * DAY },
  lockDurationMs: 120_000,
});

export const QUEUES = [
  CHAT_COMPLETION_QUEUE,
  EMBEDDINGS_QUEUE,
  IMAGE_RENDER_QUEUE,
  VIDEO_RENDER_QUEUE,
  IMAGE_GENERATION_QUEUE,
  VIDEO_GENERATION_QUEUE,
  FINE_TUNE_TOKENIZE_QUEUE,
  FINE_TUNE_INSPECT_QUEUE,
  WEBHOOK_DELIVERY_QUEUE,
  BATCH_STEP_QUEUE,
  BATCH_LINE_QUEUE,
  RESPONSE_BACKGROUND_QUEUE,
  COMPLETION_EXPORT_QUEUE,
] as const;
export type AnyQueueContract = (typeof QUEUES)[number];

/**
 * Redis hash (under the installation's prefix) of each namespace's queue weight, by namespace id:
 * written by the admin limits route, read by the fair placement of queued generations. Absent: 1.
 */
export const QUEUE_WEIGHTS_KEY = 'queue-weights';

/** The fair queue's pools: each keeps its own fair order (and, in a Redis Cluster, its own copy of the weights, beside it). */
export const QUEUE_POOLS = ['image', 'video', 'batch'] as const;
export type QueuePool = (typeof QUEUE_POOLS)[number];

/**
 * Where the fair placement of `pool` reads the weights: the one hash on a single Redis node; in a
 * cluster, a copy per pool under the pool's hash tag, so the placement script finds it on the
 * pool's shard (the admin route writes every copy).
 */
export function queueWeightsKey(names: { key(...parts: string[]): string; tag(part: string): string; readonly clustered: boolean }, pool: QueuePool): string {
  return names.clustered ? names.key(QUEUE_WEIGHTS_KEY, names.tag(pool)) : names.key(QUEUE_WEIGHTS_KEY);
}
