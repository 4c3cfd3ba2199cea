import { Injectable, Logger } from '@nestjs/common';
import type { Caller } from '@atelier/auth';
import { CreditLedger } from '@atelier/billing';
import { ApiError, CreateBatchRequest, type BatchList, type BatchObject } from '@atelier/contracts';
import { requestContext } from '@atelier/observability';
import { uuidV7 } from '@atelier/random';
import { errorSummary, JobQueues, parseBody } from '@atelier/runtime';
import { BatchEvents } from './batch-events.service';
import { batchId, batchObject, batchUuid } from './batch-object';
import { BatchesRepository } from './batches.repository';
import { stepJob } from './batch-steps';
import { FilesRepository } from './files.repository';
import { fileUuid } from './files.service';

const fieldError = (field: string, message: string) => ApiError.badRequest(message, { fields: [{ field, message }] });
/** OpenAI's only window. */
const WINDOW_MS = 24 * 3600_000;
/** A batch not yet ended: what cancel may act on. */
const CANCELLABLE = ['validating', 'in_progress'] as const;


/**
 * The gateway's side of OpenAI's Batch API (POST/GET /api/ai/batches, cancel): a batch is
 * written `validating` and handed to the queue-worker, which checks its file, reserves its
 * estimate and queues its lines (BatchValidation). Another namespace's batch is a 404 like one
 * that never existed.
 */
@Injectable()
export class BatchesService {
  private readonly logger = new Logger(BatchesService.name);

  constructor(
    private readonly batches: BatchesRepository,
    private readonly files: FilesRepository,
    private readonly ledger: CreditLedger,
    private readonly queues: JobQueues,
    private readonly events: BatchEvents,
  ) {}

  async create(caller: Caller, raw: unknown): Promise<BatchObject> {
    const body = parseBody(CreateBatchRequest, raw);
    const fileUuidOf = fileUuid(body.input_file_id);
    const file = fileUuidOf ? await this.files.find(caller.namespaceId, fileUuidOf) : null;
    if (!file) throw fieldError('input_file_id', `input_file_id: no file '${body.input_file_id}'`);
    if (file.purpose !== 'batch') throw fieldError('input_file_id', `input_file_id: file '${body.input_file_id}' has purpose '${file.purpose}'; a batch's input must be uploaded with purpose 'batch'`);
    const requestId = requestContext.current()?.requestId ?? uuidV7();
    const row = await this.batches.create({
      id: uuidV7(),
      namespaceId: caller.namespaceId,
      userId: caller.userId,
      apiKeyId: caller.keyId ?? null,
      keyPrefix: caller.keyPrefix,
      hasBudget: caller.hasBudget ?? false,
      endpoint: body.endpoint,
      inputFileId: file.id,
      completionWindow: body.completion_window,
      status: 'validating',
      metadata: body.metadata ?? undefined,
      outputExpiresAfter: body.output_expires_after?.seconds ?? null,
      webhookUrl: body.webhook ?? null,
      requestId,
      expiresAt: new Date(Date.now() + WINDOW_MS),
    });
    // The row is durable: with Redis away the queue-worker's sweep adds this step once it is back.
    await stepJob(this.queues, row.id, 'validate', requestId).catch((err: unknown) => this.logger.warn(`Could not queue the validation of ${batchId(row.id)} now (${errorSummary(err)}); the sweep will`));
    return batchObject(row, await this.batches.tally(row.id));
  }

  private async row(namespaceId: string, id: string) {
    const uuid = batchUuid(id);
    const row = uuid ? await this.batches.find(namespaceId, uuid) : null;
    if (!row) throw ApiError.notFound(`No such Batch object: ${id}`);
    return row;
  }

  async get(caller: Caller, id: string): Promise<BatchObject> {
    const row = await this.row(caller.namespaceId, id);
    return batchObject(row, await this.batches.tally(row.id));
  }

  /** GET /api/ai/batches: newest first, `limit` 1-100 (default 20), `after` a batch id. */
  async list(caller: Caller, query: Record<string, unknown>): Promise<BatchList> {
    const limit = query.limit === undefined ? 20 : Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw fieldError('limit', 'limit must be an integer between 1 and 100');
    let after: { id: string; createdAt: Date } | undefined;
    if (query.after !== undefined) {
      const row = typeof query.after === 'string' ? await this.row(caller.namespaceId, query.after).catch(() => undefined) : undefined;
      if (!row) throw fieldError('after', `after: no batch '${String(query.after)}'`);
      after = { id: row.id, createdAt: row.createdAt };
    }
    const rows = await this.batches.page(caller.namespaceId, limit, after);
    const page = rows.slice(0, limit);
    const tallies = await this.batches.tallies(page.map((r) => r.id));
    const data = page.map((r) => batchObject(r, tallies.get(r.id) ?? { total: 0, completed: 0, failed: 0, open: 0, running: 0, inputTokens: 0, outputTokens: 0 }));
    return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: rows.length > limit };
  }

  /**
   * POST /api/ai/batches/{id}/cancel: `cancelling` at once; lines not started are dropped (their
   * reservations released in the same transaction), running ones finish, then the batch ends
   * `cancelled` with its files. Cancelling an ended batch is a 409; a second cancel answers as the first.
   */
  async cancel(caller: Caller, id: string): Promise<BatchObject> {
    const row = await this.row(caller.namespaceId, id);
    if (row.status === 'cancelling' || row.status === 'cancelled') return this.get(caller, id);
    const moved = await this.batches.inTransaction(async (tx) => {
      if (!(await this.batches.transition(row.id, CANCELLABLE, 'cancelling', { cancellingAt: new Date() }, tx))) return false;
      const reservations = await this.batches.dropPending(row.id, 'cancelled', { code: 'batch_cancelled', message: 'The batch was cancelled before this request ran' }, tx);
      for (const r of reservations) await this.ledger.release(r, tx);
      await this.events.recordIn(tx, row.id);
      return true;
    });
    if (moved) await this.events.announce(row.id);
    if (!moved) {
      const now = await this.row(caller.namespaceId, id);
      if (now.status === 'cancelling' || now.status === 'cancelled') return this.get(caller, id);
      throw new ApiError('conflict', `Batch ${id} cannot be cancelled: it is ${now.status}`);
    }
    // The last running line queues the final step too; with none running, nothing else would.
    const tally = await this.batches.tally(row.id);
    if (tally.running === 0) await stepJob(this.queues, row.id, 'finalize', row.requestId).catch(() => undefined);
    return this.get(caller, id);
  }
}
