import { Inject, Injectable, Logger } from '@nestjs/common';
import { CreditLedger } from '@atelier/billing';
import { parseChatRequest, tokenCost } from '@atelier/chat';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError, BATCH_LINE_QUEUE, CHAT_COMPLETION_QUEUE, type BatchLineJob, type ChatCompletionOutcome } from '@atelier/contracts';
import { ModelCatalog, type ChatModelDefinition } from '@atelier/models';
import { QueuePositions } from '@atelier/queue';
import { randomToken } from '@atelier/random';
import { errorSummary, HandlesQueue, JobQueues, RpcClient, type JobHandler } from '@atelier/runtime';
import { discounted } from './batch-pricing';
import { stepJob } from './batch-steps';
import { BatchesRepository, type ClaimedLine, type LineEnding } from './batches.repository';

/**
 * Runs one line of a batch in the batch pool: claims it (a line runs while its batch does; one
 * whose worker died is claimed again when its job comes back), calls the model service as the
 * chat route does, and ends it with its answer and its charge in one transaction: the line's
 * reservation settles at the batch price, once, whichever attempt ends it. The last line to end
 * queues the batch's final step.
 */
@Injectable()
@HandlesQueue(BATCH_LINE_QUEUE)
export class BatchLineProcessor implements JobHandler<typeof BATCH_LINE_QUEUE> {
  private readonly logger = new Logger(BatchLineProcessor.name);

  constructor(
    private readonly batches: BatchesRepository,
    private readonly catalog: ModelCatalog,
    private readonly rpc: RpcClient,
    private readonly ledger: CreditLedger,
    private readonly queues: JobQueues,
    private readonly positions: QueuePositions,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'BATCH_DISCOUNT'>,
  ) {}

  async handle(job: BatchLineJob): Promise<void> {
    const line = await this.batches.claim(job.lineId);
    // Out of the line either way: the pool's virtual time moves on to its place.
    await this.positions.started('batch', job.lineId, job.namespaceId).catch((err: unknown) => this.logger.debug(`positions: ${errorSummary(err)}`));
    if (!line) return;
    const startedAt = performance.now();
    const model = this.catalog.get(line.model) as ChatModelDefinition | undefined;
    const { ending, cost, provider } = model ? await this.runChat(line, model) : { ending: lostModel(line), cost: null, provider: null };
    const record = {
      outcome: ending.status === 'succeeded' ? ('succeeded' as const) : ('failed' as const),
      userId: line.batch.userId,
      provider,
      stream: false,
      requestId: line.batch.requestId,
      errorMessage: ending.status === 'failed' ? errorMessageOf(ending) : null,
      durationMs: performance.now() - startedAt,
    };
    await this.batches.inTransaction(async (tx) => {
      if (!(await this.batches.finish(line.id, ending, tx))) return;
      if (cost === null) await this.ledger.release(line.reservationId, tx, record);
      else await this.ledger.settle(line.reservationId, cost, tx, { inputTokens: ending.inputTokens, outputTokens: ending.outputTokens, request: record });
    });
    if ((await this.batches.tally(line.batchId)).open === 0) await stepJob(this.queues, line.batchId, 'finalize', line.batch.requestId);
  }

  /** The chat route's call, unstreamed, on the line's own reservation; a refusal or failure is the line's answer. */
  private async runChat(line: ClaimedLine, model: ChatModelDefinition): Promise<{ ending: LineEnding; cost: string | null; provider: string | null }> {
    const requestId = `batch_req_${randomToken(16)}`;
    try {
      const { request, body, promptTokens } = parseChatRequest(model, structuredClone(line.body) as Record<string, unknown>);
      const completionId = `chatcmpl-${randomToken(18)}`;
      const outcome: ChatCompletionOutcome = await this.rpc.call(CHAT_COMPLETION_QUEUE, {
        caller: { userId: line.batch.userId, username: '', namespaceId: line.batch.namespaceId, namespace: line.batch.namespace.name, requestId },
        model: model.id,
        body,
        limits: { promptTokens, maxTokens: request.maxTokens, maxTokensExplicit: request.maxTokensExplicit },
        reservationId: line.reservationId,
        completionId,
      });
      const usage = outcome.usage;
      return {
        ending: {
          status: 'succeeded',
          response: { status_code: 200, request_id: requestId, body: outcome.completion },
          error: null,
          inputTokens: usage.prompt_tokens,
          outputTokens: usage.completion_tokens,
        },
        cost: discounted(tokenCost(model.pricing, usage.prompt_tokens, usage.completion_tokens), model, this.config.BATCH_DISCOUNT),
        provider: outcome.provider,
      };
    } catch (err) {
      const apiError = err instanceof ApiError ? err : new ApiError('internal_error', 'The request failed in the model service');
      if (!(err instanceof ApiError)) this.logger.warn(`Batch line ${line.id} failed: ${errorSummary(err)}`);
      return {
        ending: { status: 'failed', response: { status_code: apiError.status, request_id: requestId, body: apiError.toEnvelope() }, error: null, inputTokens: 0, outputTokens: 0 },
        cost: null,
        provider: null,
      };
    }
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
