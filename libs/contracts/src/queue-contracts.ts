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

export interface ChatCompletionJob {
  caller: CallerContext;
  model: string;
  /** The OpenAI-style request body, already validated against the model's schema. */
  body: Record<string, unknown>;
  reservationId: string;
}

export interface MediaRenderJob {
  caller: CallerContext;
  model: string;
  endpoint: '/images/generate' | '/images/edit' | '/videos/generate';
  params: Record<string, unknown>;
  reservationId: string;
}

export interface MediaRenderResult {
  model: string;
  created: number;
  outputs: { key: string; contentType: string }[];
}

export interface GenerationJob {
  generationId: string;
  requestId: string;
}

export interface FineTuneTokenizeJob {
  fineTuneId: string;
  requestId: string;
}

export const CHAT_COMPLETION_QUEUE = defineQueue<ChatCompletionJob, Record<string, unknown>>()('chat-completion', {
  kind: 'rpc',
  attempts: 1,
  backoff: { type: 'fixed', delay: 0 },
  concurrency: 32,
  removeOnComplete: { count: 1000, age: 3600 },
  removeOnFail: { count: 5000, age: 7 * DAY },
  lockDurationMs: 30_000,
});

export const MEDIA_RENDER_QUEUE = defineQueue<MediaRenderJob, MediaRenderResult>()('media-render', {
  kind: 'rpc',
  attempts: 1,
  backoff: { type: 'fixed', delay: 0 },
  concurrency: 4,
  removeOnComplete: { count: 1000, age: 3600 },
  removeOnFail: { count: 5000, age: 7 * DAY },
  lockDurationMs: 60_000,
});

export const GENERATION_QUEUE = defineQueue<GenerationJob>()('generation', {
  kind: 'work',
  attempts: 3,
  backoff: { type: 'exponential', delay: 2_000 },
  concurrency: 4,
  removeOnComplete: { count: 1000, age: DAY },
  removeOnFail: { count: 5000, age: 14 * DAY },
  lockDurationMs: 60_000,
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

export const QUEUES = [CHAT_COMPLETION_QUEUE, MEDIA_RENDER_QUEUE, GENERATION_QUEUE, FINE_TUNE_TOKENIZE_QUEUE] as const;
export type AnyQueueContract = (typeof QUEUES)[number];
