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
] as const;

export type GenerationRecord = Record<string, unknown> & {
  generation_id: string;
  model_name: string;
  prompt: string;
  media_type: 'image' | 'video';
  status: string;
  result_url: string | null;
  error_message: string | null;
  enqueued_at: number;
  started_at: number | null;
  completed_at: number | null;
};

const unix = (d: Date | null) => (d ? Math.floor(d.getTime() / 1000) : null);

/**
 * The spec's Generation record: fixed fields always present (null when unset), then every
 * submitted parameter echoed as given (seed/aspect_ratio/duration only when submitted).
 */
export function toGenerationRecord(
  row: Pick<
    GenerationModel,
    'id' | 'modelName' | 'prompt' | 'mediaType' | 'status' | 'errorMessage' | 'enqueuedAt' | 'startedAt' | 'completedAt' | 'params' | 'targetRepo' | 'targetDirectory' | 'cost' | 'resultKeys'
  >,
  namespace: string,
  resultUrl: (key: string) => string,
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
    cost: row.cost === null ? null : new Prisma.Decimal(row.cost).toFixed(),
  };
}
