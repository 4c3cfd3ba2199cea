import { z } from 'zod';
import { Metadata } from './batch-requests';

/**
 * The fields of POST /api/ai/chat/completions that decide whether atelier keeps the answer
 * (OpenAI's stored completions). Kept by atelier, never forwarded to a provider.
 */
export const ChatStoreFields = z.object({
  store: z.boolean({ error: 'store must be a boolean' }).nullable().optional(),
  metadata: Metadata.nullable().optional(),
});
export type ChatStoreFields = z.infer<typeof ChatStoreFields>;

/** POST /api/ai/chat/completions/{id}: OpenAI's update of a stored completion (only its metadata). */
export const UpdateStoredCompletionRequest = z.strictObject({
  metadata: Metadata.nullable(),
});
export type UpdateStoredCompletionRequest = z.infer<typeof UpdateStoredCompletionRequest>;

export const FEEDBACK_METRIC_TYPES = ['boolean', 'float'] as const;

/** POST /api/feedback_metrics: a metric feedback may be given on, in one namespace (like TensorZero's metrics). */
export const CreateFeedbackMetricRequest = z.strictObject({
  name: z
    .string({ error: 'name must be a string' })
    .regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/, 'name must be 1 to 63 characters of a-z, 0-9, _, . and -, starting with a letter or digit'),
  type: z.enum(FEEDBACK_METRIC_TYPES, { error: 'type must be boolean or float' }),
  optimize: z.enum(['max', 'min'], { error: 'optimize must be max or min' }),
  namespace: z.string({ error: 'namespace must be a string' }).optional().describe("The namespace the metric belongs to; default: the key's"),
});
export type CreateFeedbackMetricRequest = z.infer<typeof CreateFeedbackMetricRequest>;

/** POST /api/ai/feedback: a judgement of a stored completion or a stored response. */
export const CreateFeedbackRequest = z.strictObject({
  target_id: z.string({ error: 'target_id must be a stored completion (chatcmpl-...) or response (resp_...) id' }).regex(/^(chatcmpl-|resp_)[A-Za-z0-9_-]{1,100}$/, {
    message: 'target_id must be a stored completion (chatcmpl-...) or response (resp_...) id',
  }),
  metric: z.string({ error: 'metric must be the name of a feedback metric' }).regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/, 'metric must be the name of a feedback metric (1 to 63 characters of a-z, 0-9, _, . and -)'),
  value: z.union([z.boolean(), z.number().finite()], { error: 'value must be a boolean (boolean metrics) or a number (float metrics)' }),
  comment: z
    .string({ error: 'comment must be a string' })
    .max(4096, 'comment must be at most 4096 characters')
    .refine((c) => !c.includes('\0'), 'comment must not contain NUL characters')
    .optional(),
});
export type CreateFeedbackRequest = z.infer<typeof CreateFeedbackRequest>;

/** Most stored completions one export writes (it runs inside the request). */
export const EXPORT_MAX_ROWS = 10_000;

/** POST /api/ai/chat/completions/export: matching stored completions as a Parquet dataset committed to a repo of the same namespace. */
export const ExportCompletionsRequest = z.strictObject({
  filter: z
    .strictObject({
      model: z.string({ error: 'filter.model must be a string' }).max(256).optional(),
      metadata: Metadata.optional(),
      metric: z.string({ error: 'filter.metric must be a metric name' }).regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/, 'filter.metric must be the name of a feedback metric').optional(),
      min_value: z.number({ error: 'filter.min_value must be a number' }).finite().optional(),
      since: z.int({ error: 'filter.since must be Unix seconds' }).min(0, 'filter.since must be Unix seconds').optional(),
    })
    .refine((f) => f.min_value === undefined || f.metric !== undefined, { message: 'filter.min_value needs filter.metric', path: ['min_value'] })
    .optional(),
  namespace: z.string({ error: "namespace must be the repo's namespace" }).min(1).max(200),
  repo: z.string({ error: 'repo must be a repository name' }).min(1).max(200),
  path: z
    .string({ error: 'path must be a file path in the repo' })
    .max(1024)
    .regex(/^[^\0]*\.parquet$/, 'path must name a .parquet file'),
  branch: z.string({ error: 'branch must be a string' }).max(200).optional(),
});
export type ExportCompletionsRequest = z.infer<typeof ExportCompletionsRequest>;
