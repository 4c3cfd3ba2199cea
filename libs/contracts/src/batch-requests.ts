import { z } from 'zod';

/** The routes a batch may run, as OpenAI names them; a line may name them with or without `/v1`. */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/responses', '/v1/embeddings', '/v1/images/generations'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** `/chat/completions` and `/v1/chat/completions` alike; undefined for a route no batch runs. */
export function batchEndpoint(url: unknown): BatchEndpoint | undefined {
  if (typeof url !== 'string') return undefined;
  const path = url.startsWith('/v1/') ? url : `/v1${url.startsWith('/') ? '' : '/'}${url}`;
  return (BATCH_ENDPOINTS as readonly string[]).includes(path) ? (path as BatchEndpoint) : undefined;
}

/** OpenAI's metadata: at most 16 pairs, keys up to 64 characters, values up to 512. */
export const Metadata = z
  .record(z.string().max(64, 'metadata keys must be at most 64 characters'), z.string({ error: 'metadata values must be strings' }).max(512, 'metadata values must be at most 512 characters'), {
    error: 'metadata must be an object of string values',
  })
  .refine((m) => Object.keys(m).length <= 16, 'metadata may hold at most 16 pairs');

/** POST /api/ai/batches (OpenAI's BatchCreateParams); also the source of its OpenAPI request schema. */
export const CreateBatchRequest = z.strictObject({
  input_file_id: z.string({ error: 'input_file_id must be a file id' }).min(1, 'input_file_id must not be empty'),
  endpoint: z
    .string({ error: 'endpoint must be a string' })
    .refine((e) => batchEndpoint(e) !== undefined, { message: `endpoint must be one of ${BATCH_ENDPOINTS.join(', ')}` })
    .transform((e) => batchEndpoint(e) as BatchEndpoint),
  completion_window: z.literal('24h', { error: "completion_window must be '24h'" }),
  metadata: Metadata.nullable().optional(),
  output_expires_after: z
    .strictObject({
      anchor: z.literal('created_at', { error: "output_expires_after.anchor must be 'created_at'" }),
      seconds: z.int({ error: 'output_expires_after.seconds must be an integer' }).min(3600, 'output_expires_after.seconds must be at least 3600 (1 hour)').max(2_592_000, 'output_expires_after.seconds must be at most 2592000 (30 days)'),
    })
    .optional(),
  webhook: z
    .url({ protocol: /^https?$/, error: 'webhook must be an absolute http(s) URL' })
    .max(2048, 'webhook must be at most 2048 characters')
    .refine((u) => !/^https?:\/\/[^/]*@/.test(u), 'webhook must not carry credentials in the URL')
    .optional()
    .describe("atelier's: every status change of the batch is POSTed there as `{type: \"batch.status\", timestamp, data: <batch>}`, signed like the other webhooks"),
});
export type CreateBatchRequest = z.infer<typeof CreateBatchRequest>;
