import type { BatchObject } from '@atelier/contracts';
import type { BatchModel } from '@atelier/db';
import type { BatchTally } from './batches.repository';
import { fileId } from './files.service';

const unix = (d: Date | null) => (d ? Math.floor(d.getTime() / 1000) : null);

/** `batch_` and the row's uuid without dashes: OpenAI's id shape. */
export const batchId = (uuid: string) => `batch_${uuid.replace(/-/g, '')}`;
/** The row's uuid of a `batch_...` id; undefined for anything that cannot be one. */
export function batchUuid(id: string): string | undefined {
  const hex = /^batch_([0-9a-f]{32})$/.exec(id)?.[1];
  return hex && `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The batch object exactly as OpenAI's, with request_counts and usage read live from its lines. */
export function batchObject(row: BatchModel, tally: BatchTally, model: string | null = null): BatchObject {
  const errors = row.errors as BatchObject['errors'] | null;
  return {
    id: batchId(row.id),
    object: 'batch',
    endpoint: row.endpoint,
    model,
    errors: errors ?? null,
    input_file_id: fileId(row.inputFileId),
    completion_window: row.completionWindow,
    status: row.status as BatchObject['status'],
    output_file_id: row.outputFileId ? fileId(row.outputFileId) : null,
    error_file_id: row.errorFileId ? fileId(row.errorFileId) : null,
    created_at: unix(row.createdAt) as number,
    in_progress_at: unix(row.inProgressAt),
    expires_at: unix(row.expiresAt),
    finalizing_at: unix(row.finalizingAt),
    completed_at: unix(row.completedAt),
    failed_at: unix(row.failedAt),
    expired_at: unix(row.expiredAt),
    cancelling_at: unix(row.cancellingAt),
    cancelled_at: unix(row.cancelledAt),
    request_counts: { total: tally.total, completed: tally.completed, failed: tally.failed },
    usage: {
      input_tokens: tally.inputTokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: tally.outputTokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: tally.inputTokens + tally.outputTokens,
    },
    metadata: (row.metadata as Record<string, string> | null) ?? null,
  };
}
