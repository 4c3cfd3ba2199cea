import { Inject, Injectable } from '@nestjs/common';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import { chargeTags, PaidRequests, reservationReference, type Reservation } from '@atelier/billing';
import { EMBEDDINGS_QUEUE, type EmbeddingsOutcome } from '@atelier/contracts';
import { ModelCatalog, type EmbeddingModelDefinition, type TokenPricing } from '@atelier/models';
import { Metrics } from '@atelier/observability';
import { randomToken, uuidV7 } from '@atelier/random';
import { RateLimiter, RpcClient } from '@atelier/runtime';
import { tokenCost } from '../chat-pricing';
import { base64ToVector } from './embedding-vectors';
import { parseEmbeddingsRequest } from './embeddings-request';
import { correctTokens, takeTokens } from '../tokens-per-minute';

/** The route embeddings usage is reported under (GET /api/usage?group_by=endpoint). */
const EMBEDDINGS_ENDPOINT = '/api/ai/embeddings';

export interface EmbeddingsDelivery {
  signal: AbortSignal;
  header(name: string, value: string): void;
  /** The answer; the charge is settled once this resolves. */
  send(answer: Record<string, unknown>): Promise<void>;
}

/** An embedding model's prices as tokenCost reads them: input tokens only. */
const inputPrices = new WeakMap<EmbeddingModelDefinition, TokenPricing>();
function pricingOf(model: EmbeddingModelDefinition): TokenPricing {
  let pricing = inputPrices.get(model);
  if (!pricing) inputPrices.set(model, (pricing = { method: 'token', input_cost_per_token: model.pricing.input_cost_per_token, output_cost_per_token: '0' }));
  return pricing;
}

/**
 * The gateway's side of POST /api/ai/embeddings, on the same paid lifecycle as chat: validate,
 * count the inputs' tokens against the caller's tokens per minute, reserve their price, hand
 * the inputs to the chat service (which runs the model, splitting them into the upstream's
 * batches), answer, and charge the tokens used: the upstream's count, else atelier's own, so an
 * embedding is never billed as zero.
 */
@Injectable()
export class EmbeddingsService {
  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly access: NamespaceAccess,
    private readonly paid: PaidRequests,
    private readonly rpc: RpcClient,
    private readonly metrics: Metrics,
    private readonly limiter: RateLimiter,
  ) {}

  async create(caller: Caller, rawBody: unknown, requestId: string, delivery: EmbeddingsDelivery): Promise<void> {
    const startedAt = performance.now();
    const request = parseEmbeddingsRequest(this.catalog, rawBody);
    const { model, tokens } = request;
    const scope = await this.access.resolve(caller, request.body.target_namespace);
    const tokensTaken = takeTokens(this.limiter, this.metrics, caller, tokens, (n, v) => delivery.header(n, v), (limit) =>
      `This request's inputs hold ${tokens} tokens, more than the ${limit.limit} tokens per minute of ${limit.name}; send fewer inputs per request`,
    );
    tokensTaken.catch(() => undefined);
    const id = `embd-${randomToken(18)}`;
    const reservationId = uuidV7();
    const pricing = pricingOf(model);
    let paid: { reservation: Reservation; work: Promise<EmbeddingsOutcome> };
    try {
      paid = await this.paid.reserveAndStart(
        scope.id,
        tokenCost(pricing, tokens, 0),
        reservationReference('chat', id),
        chargeTags(caller, model.id, EMBEDDINGS_ENDPOINT),
        { stage: 'embeddings.reserve', signal: delivery.signal, id: reservationId, admitted: tokensTaken },
        (signal) =>
          this.metrics.timed('embeddings.rpc', () =>
            this.rpc.call(
              EMBEDDINGS_QUEUE,
              {
                caller: { userId: caller.userId, username: caller.username, namespaceId: scope.id, namespace: scope.name, requestId },
                model: model.id,
                input: request.inputs,
                ...(request.dimensions !== undefined && { dimensions: request.dimensions }),
                inputTokens: tokens,
                reservationId,
              },
              { signal },
            ),
          ),
      );
    } catch (err) {
      void tokensTaken.then((taken) => correctTokens(this.limiter, taken, 0), () => undefined);
      throw err;
    }
    const taken = await tokensTaken;
    const settle = (used: number, outcome: 'succeeded' | 'failed' | 'cancelled', provider: string | null, error?: unknown) => {
      correctTokens(this.limiter, taken, used);
      return this.paid.close(paid.reservation, used > 0 ? tokenCost(pricing, used, 0) : null, {
        inputTokens: used,
        outputTokens: 0,
        request: {
          outcome,
          userId: caller.userId,
          provider,
          stream: false,
          requestId,
          errorMessage: error === undefined ? null : error instanceof Error ? error.message : String(error),
          durationMs: performance.now() - startedAt,
        },
      });
    };
    let outcome: EmbeddingsOutcome;
    try {
      outcome = await paid.work;
    } catch (err) {
      await settle(0, delivery.signal.aborted ? 'cancelled' : 'failed', null, err);
      throw err;
    }
    const used = outcome.usage.prompt_tokens;
    const data = outcome.vectors.map((vector, index) => ({ object: 'embedding', index, embedding: request.encoding === 'base64' ? vector : base64ToVector(vector) }));
    await delivery.send({ object: 'list', data, model: model.id, usage: { prompt_tokens: used, total_tokens: used } });
    await settle(used, 'succeeded', outcome.provider);
  }
}
