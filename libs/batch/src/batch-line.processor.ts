import { Injectable, Logger } from '@nestjs/common';
import { CreditLedger } from '@atelier/billing';
import { ApiError, BATCH_LINE_QUEUE, type BatchLineJob } from '@atelier/contracts';
import { QueuePositions } from '@atelier/queue';
import { randomToken } from '@atelier/random';
import { errorSummary, HandlesQueue, JobQueues, type JobHandler } from '@atelier/runtime';
import { stepJob } from './batch-steps';
import { BatchesRepository, type ClaimedLine, type LineEnding } from './batches.repository';
import type { LineAnswer } from './line-runners/batch-line-runner';
import { BatchLineRunners } from './line-runners/batch-line-runners';

/**
 * Runs one line of a batch in the batch pool: claims it (a line runs while its batch does; one
 * whose worker died is claimed again when its job comes back), calls the model service as its
 * route does (BatchLineRunners), and ends it with its answer and its charge in one transaction: the line's
 * reservation settles at the batch price, once, whichever attempt ends it. The last line to end
 * queues the batch's final step.
 */
@Injectable()
@HandlesQueue(BATCH_LINE_QUEUE)
export class BatchLineProcessor implements JobHandler<typeof BATCH_LINE_QUEUE> {
  private readonly logger = new Logger(BatchLineProcessor.name);

  constructor(
    private readonly batches: BatchesRepository,
    private readonly runners: BatchLineRunners,
    private readonly ledger: CreditLedger,
    private readonly queues: JobQueues,
    private readonly positions: QueuePositions,
  ) {}

  async handle(job: BatchLineJob): Promise<void> {
    const line = await this.batches.claim(job.lineId);
    // Out of the line either way: the pool's virtual time moves on to its place.
    await this.positions.started('batch', job.lineId, job.namespaceId).catch((err: unknown) => this.logger.debug(`positions: ${errorSummary(err)}`));
    if (!line) return;
    const startedAt = performance.now();
    const runner = this.runners.for(line.batch.endpoint);
    const model = runner.model(line.model);
    const requestId = `batch_req_${randomToken(16)}`;
    let ending: LineEnding;
    let answer: LineAnswer | undefined;
    if (!model) ending = lostModel(line);
    else
      try {
        const caller = { userId: line.batch.userId, namespaceId: line.batch.namespaceId, namespace: line.batch.namespace.name };
        answer = await runner.run(model, line.body as Record<string, unknown>, caller, { requestId, reservationId: line.reservationId });
        ending = { status: 'succeeded', response: { status_code: 200, request_id: requestId, body: answer.body }, error: null, inputTokens: answer.inputTokens, outputTokens: answer.outputTokens };
      } catch (err) {
        const apiError = err instanceof ApiError ? err : new ApiError('internal_error', 'The request failed in the model service');
        if (!(err instanceof ApiError)) this.logger.warn(`Batch line ${line.id} failed: ${errorSummary(err)}`);
        ending = { status: 'failed', response: { status_code: apiError.status, request_id: requestId, body: apiError.toEnvelope() }, error: null, inputTokens: 0, outputTokens: 0 };
      }
    const record = {
      outcome: ending.status === 'succeeded' ? ('succeeded' as const) : ('failed' as const),
      userId: line.batch.userId,
      provider: answer?.provider ?? null,
      stream: false,
      requestId: line.batch.requestId,
      errorMessage: ending.status === 'failed' ? errorMessageOf(ending) : null,
      durationMs: performance.now() - startedAt,
    };
    await this.batches.inTransaction(async (tx) => {
      if (!(await this.batches.finish(line.id, ending, tx))) return;
      if (!answer) await this.ledger.release(line.reservationId, tx, record);
      else await this.ledger.settle(line.reservationId, answer.cost, tx, { inputTokens: answer.inputTokens, outputTokens: answer.outputTokens, ...(answer.images !== undefined && { images: answer.images }), request: record });
    });
    if (!(await this.batches.hasOpenLines(line.batchId))) await stepJob(this.queues, line.batchId, 'finalize', line.batch.requestId);
  }
}

/** The catalog lost the line's model since validation (a new catalog): the line fails, uncharged. */
function lostModel(line: ClaimedLine): LineEnding {
  return { status: 'failed', response: null, error: { code: 'model_not_found', message: `The model '${line.model}' is no longer served` }, inputTokens: 0, outputTokens: 0 };
}

function errorMessageOf(ending: LineEnding): string {
  const body = ending.response?.body as { error?: { message?: string } } | undefined;
  return body?.error?.message ?? ending.error?.message ?? 'failed';
}
