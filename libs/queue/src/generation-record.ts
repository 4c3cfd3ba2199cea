import type { Generation } from '@atelier/contracts';
import { Prisma, type GenerationModel } from '@atelier/db';

/** Fields the record itself defines; a submitted parameter may not shadow them. */
export const RECORD_FIELDS = [
  'generation_id',
  'model_name',
  'prompt',
  'media_type',
  'status',
  'result_url',
  'error_message',
  'enqueued_at',
  'started_at',
  'completed_at',
  'target_namespace',
  'target_repo',
  'target_directory',
  'cost',
  'queue_position',
  'progress',
  'priority',
] as const;

/** What the record reads from Redis beside the row: place in the queue, and the engine's progress. */
export interface LiveFields {
  queuePosition: number | null;
  progress: number | null;
}

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

/** The API's Generation (one declaration: libs/contracts' GenerationShape). */
export type GenerationRecord = Generation;

/** The row's fields a record shows: a Prisma row, or a raw one with its cost as text. */
export type GenerationRecordRow = Pick<
  GenerationModel,
  'id' | 'modelName' | 'prompt' | 'mediaType' | 'status' | 'errorMessage' | 'enqueuedAt' | 'startedAt' | 'completedAt' | 'params' | 'targetRepo' | 'targetDirectory' | 'resultKeys' | 'priority'
> & { cost: GenerationModel['cost'] | string };

/** The same fields as the gateway's reads return them (one json value per row): times already in Unix seconds. */
export type GenerationJsonRow = Omit<GenerationRecordRow, 'enqueuedAt' | 'startedAt' | 'completedAt' | 'cost'> & {
  cost: string | null;
  enqueuedAt: number;
  startedAt: number | null;
  completedAt: number | null;
};

const unix = (d: Date | number | null) => (d === null ? null : typeof d === 'number' ? d : Math.floor(d.getTime() / 1000));

/**
 * The spec's Generation record: fixed fields always present (null when unset), then every
 * submitted parameter echoed as given (seed/aspect_ratio/duration only when submitted).
 */
export function toGenerationRecord(
  row: GenerationRecordRow | GenerationJsonRow,
  namespace: string,
  resultUrl: (key: string) => string,
  live?: LiveFields,
): GenerationRecord {
  const params = (row.params ?? {}) as Record<string, unknown>;
  const echoed = Object.fromEntries(Object.entries(params).filter(([k]) => k !== 'prompt'));
  return {
    generation_id: row.id,
    model_name: row.modelName,
    prompt: row.prompt,
    media_type: row.mediaType,
    status: row.status,
    result_url: row.status === 'succeeded' && row.resultKeys.length > 0 ? resultUrl(row.resultKeys[0]) : null,
    error_message: row.errorMessage,
    enqueued_at: unix(row.enqueuedAt)!,
    started_at: unix(row.startedAt),
    completed_at: unix(row.completedAt),
    ...echoed,
    target_namespace: namespace,
    target_repo: row.targetRepo,
    target_directory: row.targetDirectory,
    priority: row.priority ?? 'normal',
    // The credits charged once terminal ("0" when failed or cancelled); null while active.
    cost: TERMINAL.has(row.status) ? new Prisma.Decimal(row.cost ?? 0).toFixed() : null,
    queue_position: row.status === 'queued' ? (live?.queuePosition ?? null) : null,
    progress: row.status === 'succeeded' ? 1 : row.status === 'processing' ? (live?.progress ?? null) : null,
  };
}
