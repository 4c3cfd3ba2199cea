import { Inject, Injectable } from '@nestjs/common';
import { base64ToVector, parseEmbeddingsRequest, tokenCost } from '@atelier/chat';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { EMBEDDINGS_QUEUE } from '@atelier/contracts';
import { ModelCatalog, type EmbeddingModelDefinition, type ModelDefinition } from '@atelier/models';
import { RpcClient } from '@atelier/runtime';
import { discounted } from '../batch-pricing';
import type { BatchLineRunner, LineAnswer, LineCaller, LinePlan } from './batch-line-runner';
import { planned } from './chat-line.runner';

/** An embedding model's price of `tokens` input tokens (it has no output price). */
const inputCost = (model: EmbeddingModelDefinition, tokens: number) =>
  tokenCost({ method: 'token', input_cost_per_token: model.pricing.input_cost_per_token, output_cost_per_token: '0' }, tokens, 0);

/** `/v1/embeddings` lines: the embeddings route's checks (inputs, the context window), priced by their tokens less the batch discount. */
@Injectable()
export class EmbeddingsLineRunner implements BatchLineRunner {
  constructor(
    private readonly catalog: ModelCatalog,
    private readonly rpc: RpcClient,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'BATCH_DISCOUNT'>,
  ) {}

  model(name: string): EmbeddingModelDefinition | undefined {
    const model = this.catalog.get(name);
    return model?.endpoint === '/embeddings' ? model : undefined;
  }

  plan(model: ModelDefinition, raw: Record<string, unknown>): LinePlan {
    return planned(() => {
      const request = parseEmbeddingsRequest(this.catalog, structuredClone(raw));
      return { body: request.body, estimate: discounted(inputCost(model as EmbeddingModelDefinition, request.tokens), model, this.config.BATCH_DISCOUNT) };
    });
  }

  async run(model: ModelDefinition, raw: Record<string, unknown>, caller: LineCaller, ids: { requestId: string; reservationId: string }): Promise<LineAnswer> {
    const request = parseEmbeddingsRequest(this.catalog, structuredClone(raw));
    const outcome = await this.rpc.call(EMBEDDINGS_QUEUE, {
      caller: { userId: caller.userId, username: '', namespaceId: caller.namespaceId, namespace: caller.namespace, requestId: ids.requestId },
      model: model.id,
      input: request.inputs,
      ...(request.dimensions !== undefined && { dimensions: request.dimensions }),
      inputTokens: request.tokens,
      reservationId: ids.reservationId,
    });
    const used = outcome.usage.prompt_tokens;
    const data = outcome.vectors.map((vector, index) => ({ object: 'embedding', index, embedding: request.encoding === 'base64' ? vector : base64ToVector(vector) }));
    return {
      body: { object: 'list', data, model: model.id, usage: { prompt_tokens: used, total_tokens: used } },
      inputTokens: used,
      outputTokens: 0,
      cost: discounted(inputCost(model as EmbeddingModelDefinition, used), model, this.config.BATCH_DISCOUNT),
      provider: outcome.provider,
    };
  }
}
