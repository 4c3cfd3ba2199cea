import { createInterface } from 'node:readline';
import { Injectable, Logger } from '@nestjs/common';
import { chargeTags, CreditLedger, reservationReference } from '@atelier/billing';
import { ApiError, BATCH_LINE_QUEUE, type BatchEndpoint } from '@atelier/contracts';
import type { BatchModel, Prisma } from '@atelier/db';
import type { ModelDefinition } from '@atelier/models';
import { QueuePositions } from '@atelier/queue';
import { uuidV7 } from '@atelier/random';
import { JobQueues } from '@atelier/runtime';
import { BlobStore } from '@atelier/storage';
import { checkBatchInput, type BatchInputError } from './batch-input';
import { BatchEvents } from './batch-events.service';
import { batchId } from './batch-object';
import { BatchesRepository, type NewLine } from './batches.repository';
import { stepJob } from './batch-steps';
import { BatchLineRunners } from './line-runners/batch-line-runners';
import { FilesRepository } from './files.repository';

/** Usage rows of batch lines name this endpoint (GET /api/usage?group_by=endpoint): batch spending apart from interactive. */
export const BATCH_USAGE_ENDPOINT = '/api/ai/batches';
/** Lines placed in the fair order and queued per round trip. */
const DISPATCH_SLICE = 1000;

/** A line as the file holds it once checkBatchInput has passed it. */
interface InputLine {
  custom_id: string;
  body: Record<string, unknown>;
}

/**
 * The queue-worker's first step of a batch: reads its input file as a stream, fails the batch
 * with errors.data when the file is bad, else writes its lines and reserves their estimate
 * (credits and the creating key's budget, all or nothing) in one transaction, and queues the
 * lines in the namespace's fair share of the batch pool. Safe to re-run: the batch's status
 * guards every step, and a re-run after the commit only queues its pending lines again (job ids
 * are line ids).
 */
@Injectable()
export class BatchValidation {
  private readonly logger = new Logger(BatchValidation.name);

  constructor(
    private readonly batches: BatchesRepository,
    private readonly files: FilesRepository,
    private readonly blobs: BlobStore,
    private readonly runners: BatchLineRunners,
    private readonly ledger: CreditLedger,
    private readonly queues: JobQueues,
    private readonly positions: QueuePositions,
    private readonly events: BatchEvents,
  ) {}

  async validate(id: string, requestId: string): Promise<void> {
    const batch = await this.batches.byId(id);
    if (batch?.status === 'in_progress') {
      await this.dispatch(batch, requestId);
      return;
    }
    if (batch?.status !== 'validating') return;
    const file = await this.files.find(batch.namespaceId, batch.inputFileId);
    if (!file) return this.fail(batch, [{ code: 'missing_file', message: 'The input file no longer exists (deleted or expired)', line: null, param: 'input_file_id' }]);
    const first = await this.blobs.get(file.blobKey);
    if (!first) throw new Error(`The input file of ${batchId(id)} cannot be read now`);
    const runner = this.runners.for(batch.endpoint);
    const check = await checkBatchInput(first.body, batch.endpoint as BatchEndpoint, (m) => runner.model(m) !== undefined);
    if (check.errors.length > 0) return this.fail(batch, check.errors);

    const second = await this.blobs.get(file.blobKey);
    if (!second) throw new Error(`The input file of ${batchId(id)} cannot be read now`);
    const payer = { keyId: batch.apiKeyId ?? undefined, keyPrefix: batch.keyPrefix, hasBudget: batch.hasBudget, namespaceId: batch.namespaceId, namespace: '' };
    try {
      const started = await this.batches.inTransaction(async (tx) => {
        if (!(await this.batches.transition(id, ['validating'], 'in_progress', { inProgressAt: new Date() }, tx))) return false;
        const byModel = new Map<string, { id: string; amount: string; reference: string }[]>();
        let slice: NewLine[] = [];
        let n = 0;
        for await (const text of createInterface({ input: second.body, crlfDelay: Infinity })) {
          n++;
          if (text.trim() === '') continue;
          const line = JSON.parse(text) as InputLine;
          const modelName = line.body.model as string;
          const model = runner.model(modelName) as ModelDefinition;
          const plan = runner.plan(model, line.body);
          const reservationId = uuidV7();
          if ('refused' in plan) {
            slice.push({ id: uuidV7(), lineNo: n, customId: line.custom_id, model: model.id, body: line.body, reservationId, ending: refusedEnding(plan.refused, requestId) });
          } else {
            slice.push({ id: uuidV7(), lineNo: n, customId: line.custom_id, model: model.id, body: plan.body, reservationId });
            const items = byModel.get(model.id) ?? [];
            items.push({ id: reservationId, amount: plan.estimate, reference: reservationReference('batch', id, String(n)) });
            byModel.set(model.id, items);
          }
          if (slice.length >= 2000) {
            await this.batches.insertLines(id, slice, tx);
            slice = [];
          }
        }
        await this.batches.insertLines(id, slice, tx);
        // Last, right before the commit: the namespace's row (and the key's) stay locked briefly.
        for (const [model, items] of byModel) await this.ledger.reserveBatch(batch.namespaceId, items, tx, chargeTags(payer, model, BATCH_USAGE_ENDPOINT));
        await this.events.recordIn(tx, id);
        return true;
      });
      if (!started) return;
      await this.events.announce(id);
    } catch (err) {
      // The estimate is not there (credits, or the key's budget): the batch fails and nothing was reserved.
      if (err instanceof ApiError && (err.type === 'insufficient_credits' || err.type === 'budget_exceeded'))
        return this.fail(batch, [{ code: err.type, message: `${err.message}: the batch's estimate (every line's prompt plus its max_tokens, at the batch price) is reserved before it runs`, line: null, param: null }]);
      throw err;
    }
    const now = await this.batches.byId(id);
    if (now) await this.dispatch(now, requestId);
  }

  /**
   * Places the pending lines in the batch pool's fair order and queues them (jobId = line id: a
   * second dispatch adds nothing). `repair` (the sweep's, for a batch whose lines stopped moving):
   * only the lines whose job is gone (Redis lost it) or kept as ended (it failed for good, say
   * through a database outage), each removed and queued again.
   */
  private async dispatch(batch: BatchModel, requestId: string, repair = false): Promise<number> {
    const pending = await this.batches.pendingLines(batch.id);
    let queued = 0;
    for (let i = 0; i < pending.length; i += DISPATCH_SLICE) {
      let slice = pending.slice(i, i + DISPATCH_SLICE);
      if (repair) slice = await this.lost(slice);
      if (slice.length === 0) continue;
      queued += slice.length;
      const { priorities } = await this.positions.add('batch', slice.map((lineId) => ({ id: lineId, namespaceId: batch.namespaceId })));
      await this.queues.addBulk(
        BATCH_LINE_QUEUE,
        slice.map((lineId, k) => ({ payload: { batchId: batch.id, lineId, namespaceId: batch.namespaceId, requestId }, jobId: lineId, priority: priorities[k] })),
      );
    }
    // Every line refused by its model (or none left): nothing will queue the final step but this.
    if (pending.length === 0 && !(await this.batches.hasOpenLines(batch.id))) await stepJob(this.queues, batch.id, 'finalize', requestId);
    return queued;
  }

  /** Of these pending lines, those no live job will run; their ended jobs are removed so the ids can be added again. */
  private async lost(lineIds: string[]): Promise<string[]> {
    const queue = this.queues.queue(BATCH_LINE_QUEUE);
    const states = await Promise.all(lineIds.map(async (id) => ({ id, state: await queue.getJobState(id) })));
    const lost = states.filter((s) => s.state === 'unknown' || s.state === 'failed' || s.state === 'completed');
    await Promise.all(lost.filter((s) => s.state !== 'unknown').map((s) => queue.remove(s.id).catch(() => undefined)));
    return lost.map((s) => s.id);
  }

  /** The sweep's repair of a running batch whose lines stopped moving: how many lines it queued again. */
  async redispatch(id: string): Promise<number> {
    const batch = await this.batches.byId(id);
    if (batch?.status !== 'in_progress') return 0;
    const queued = await this.dispatch(batch, batch.requestId, true);
    if (queued > 0) this.logger.warn(`Batch ${batchId(id)}: ${queued} line(s) had lost their job and were queued again`);
    return queued;
  }

  private async fail(batch: BatchModel, errors: BatchInputError[] | { code: string; message: string; line: null; param: string | null }[]): Promise<void> {
    const moved = await this.events.transition(batch.id, ['validating'], 'failed', { failedAt: new Date(), errors: { object: 'list', data: errors } as unknown as Prisma.InputJsonObject });
    if (moved) this.logger.log(`Batch ${batchId(batch.id)} failed validation: ${errors[0]?.message ?? ''}`);
  }
}

/** A line its model refused at validation: its answer is the route's own 400, in the error file. */
export function refusedEnding(err: ApiError, requestId: string) {
  return {
    status: 'failed' as const,
    response: { status_code: err.status, request_id: requestId, body: err.toEnvelope() },
    error: null,
    inputTokens: 0,
    outputTokens: 0,
  };
}
