import { Inject, Injectable } from '@nestjs/common';
import { parseChatRequest, tokenCost } from '@atelier/chat';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError, CHAT_COMPLETION_QUEUE } from '@atelier/contracts';
import { ModelCatalog, type ChatModelDefinition, type ModelDefinition } from '@atelier/models';
import { randomToken } from '@atelier/random';
import { RpcClient } from '@atelier/runtime';
import { discounted } from '../batch-pricing';
import type { BatchLineRunner, LineAnswer, LineCaller, LinePlan } from './batch-line-runner';

/** Refusals of the route's own checks become the line's answer; anything else is a fault. */
export function planned(make: () => { body: Record<string, unknown>; estimate: string }): LinePlan {
  try {
    return make();
  } catch (err) {
    if (err instanceof ApiError) return { refused: err };
    throw err;
  }
}

/** The answer of a chat call, unstreamed (a batch line has nobody to stream to). */
export function unstreamed(body: Record<string, unknown>): Record<string, unknown> {
  const { stream: _stream, stream_options: _options, ...rest } = body;
  return rest;
}

/**
 * `/v1/chat/completions` lines: the chat route's validation (the model's schema, the context
 * window), priced at prompt plus max_tokens less the batch discount, run on the chat service.
 */
@Injectable()
export class ChatLineRunner implements BatchLineRunner {
  constructor(
    private readonly catalog: ModelCatalog,
    private readonly rpc: RpcClient,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'BATCH_DISCOUNT'>,
  ) {}

  model(name: string): ChatModelDefinition | undefined {
    const model = this.catalog.get(name);
    return model?.endpoint === '/chat/completions' ? model : undefined;
  }

  plan(model: ModelDefinition, raw: Record<string, unknown>): LinePlan {
    const chat = model as ChatModelDefinition;
    return planned(() => {
      const { request, body, promptTokens } = parseChatRequest(chat, unstreamed(raw));
      return { body, estimate: discounted(tokenCost(chat.pricing, promptTokens, request.maxTokens), chat, this.config.BATCH_DISCOUNT) };
    });
  }

  async run(model: ModelDefinition, raw: Record<string, unknown>, caller: LineCaller, ids: { requestId: string; reservationId: string }): Promise<LineAnswer> {
    const { completion, usage, provider } = await this.complete(model as ChatModelDefinition, raw, caller, ids);
    return { body: completion, inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens, cost: this.cost(model as ChatModelDefinition, usage), provider };
  }

  /** One chat completion, as the chat route hands it to the chat service. */
  async complete(model: ChatModelDefinition, raw: Record<string, unknown>, caller: LineCaller, ids: { requestId: string; reservationId: string }) {
    const { request, body, promptTokens } = parseChatRequest(model, structuredClone(unstreamed(raw)));
    const outcome = await this.rpc.call(CHAT_COMPLETION_QUEUE, {
      caller: { userId: caller.userId, username: '', namespaceId: caller.namespaceId, namespace: caller.namespace, requestId: ids.requestId },
      model: model.id,
      body,
      limits: { promptTokens, maxTokens: request.maxTokens, maxTokensExplicit: request.maxTokensExplicit },
      reservationId: ids.reservationId,
      completionId: `chatcmpl-${randomToken(18)}`,
    });
    return { completion: outcome.completion as Record<string, unknown>, usage: outcome.usage, provider: outcome.provider };
  }

  cost(model: ChatModelDefinition, usage: { prompt_tokens: number; completion_tokens: number }): string {
    return discounted(tokenCost(model.pricing, usage.prompt_tokens, usage.completion_tokens), model, this.config.BATCH_DISCOUNT);
  }
}
