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
  target_id: z.string({ error: 'target_id must be a stored completion (chatcmpl-... or msg_...) or response (resp_...) id' }).regex(/^(chatcmpl-|msg_|resp_)[A-Za-z0-9_-]{1,100}$/, {
    message: 'target_id must be a stored completion (chatcmpl-... or msg_...) or response (resp_...) id',
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

/** Most stored completions an export writes inside the request; past this it runs on the completion-export queue. */
export const EXPORT_MAX_ROWS = 10_000;
/** Most stored completions one queued export writes. */
export const EXPORT_MAX_QUEUED_ROWS = 1_000_000;

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
  background: z.boolean({ error: 'background must be a boolean' }).optional().describe(`Queue it (202) even under ${EXPORT_MAX_ROWS} completions; past that it is always queued`),
});
export type ExportCompletionsRequest = z.infer<typeof ExportCompletionsRequest>;

export const EXPERIMENT_MODES = ['fixed', 'adaptive'] as const;
/** What an experiment may be named (it becomes a model id of its namespace). */
export const EXPERIMENT_NAME = /^[a-z0-9][a-z0-9_.:-]{0,62}$/;
/** Most variants one experiment splits between. */
export const EXPERIMENT_MAX_VARIANTS = 10;

const experimentModel = z
  .string({ error: 'model must be a model id' })
  .min(1, 'model must be a model id')
  .max(256, 'model must be at most 256 characters')
  .refine((m) => !m.includes('\0'), 'model must not contain NUL characters');

/**
 * POST /api/ai/experiments: `name` becomes a model id of the namespace whose requests go to a
 * variant by weight (sticky per user or metadata key), and with `mode: "adaptive"` the weights
 * follow the metric (TensorZero's adaptive A/B tests).
 */
export const CreateExperimentRequest = z
  .strictObject({
    name: z
      .string({ error: 'name must be a string' })
      .regex(EXPERIMENT_NAME, 'name must be 1 to 63 characters of a-z, 0-9, _, ., : and -, starting with a letter or digit'),
    variants: z
      .array(z.strictObject({ model: experimentModel, weight: z.number({ error: 'weight must be a number from 0 to 1' }).min(0, 'weight must be from 0 to 1').max(1, 'weight must be from 0 to 1') }), {
        error: 'variants must be a list of {model, weight}',
      })
      .min(2, 'variants must name at least 2 models')
      .max(EXPERIMENT_MAX_VARIANTS, `variants must name at most ${EXPERIMENT_MAX_VARIANTS} models`)
      .refine((vs) => Math.abs(vs.reduce((a, v) => a + v.weight, 0) - 1) < 1e-6, 'the weights of variants must sum to 1')
      .refine((vs) => new Set(vs.map((v) => v.model)).size === vs.length, 'variants must name each model once'),
    metric: z.string({ error: 'metric must be the name of a feedback metric' }).regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/, 'metric must be the name of a feedback metric of the namespace').optional(),
    mode: z.enum(EXPERIMENT_MODES, { error: 'mode must be fixed or adaptive' }).default('fixed'),
    sticky_by: z
      .string({ error: 'sticky_by must be "user" or "metadata.<key>"' })
      .regex(/^(user|metadata\.[A-Za-z0-9_.:-]{1,64})$/, 'sticky_by must be "user" or "metadata.<key>"')
      .optional(),
    min_weight: z.number({ error: 'min_weight must be a number' }).min(0, 'min_weight must be from 0 to 0.5').max(0.5, 'min_weight must be from 0 to 0.5').default(0.05).describe('Least share an adaptive experiment leaves each variant'),
    namespace: z.string({ error: 'namespace must be a string' }).optional().describe("The namespace the experiment's name is a model of; default: the key's"),
  })
  .refine((r) => r.mode !== 'adaptive' || r.metric !== undefined, { message: 'mode "adaptive" needs a metric to adapt to', path: ['metric'] })
  .refine((r) => r.min_weight * r.variants.length <= 1, { message: 'min_weight times the number of variants must be at most 1', path: ['min_weight'] });
export type CreateExperimentRequest = z.infer<typeof CreateExperimentRequest>;

/** POST /api/ai/experiments/{name}/promote: every request to one variant from now on. */
export const PromoteExperimentRequest = z.strictObject({ model: experimentModel });
export type PromoteExperimentRequest = z.infer<typeof PromoteExperimentRequest>;
