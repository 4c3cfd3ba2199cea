import { Injectable } from '@nestjs/common';
import { MediaRenderer, usageCost } from '@atelier/engines';
import { GenerationRenderer, type RenderResult, type RenderTarget } from '@atelier/generations';
import type { MediaModelDefinition, ModelDefinition } from '@atelier/models';
import { requestContext } from '@atelier/observability';

/** Queued generations run on the same engines and storage layout as the synchronous endpoints. */
@Injectable()
export class EngineRenderer extends GenerationRenderer {
  constructor(private readonly media: MediaRenderer) {
    super();
  }

  async render(model: ModelDefinition, params: Record<string, unknown>, target: RenderTarget, signal: AbortSignal): Promise<RenderResult> {
    const result = await this.media.render(
      {
        caller: { userId: target.userId, username: '', namespaceId: target.namespaceId, namespace: target.namespace, requestId: requestContext.current()?.requestId ?? target.generationId },
        model: model.id,
        params,
        target: { ...(target.repo ? { repo: target.repo } : {}), ...(target.directory ? { directory: target.directory } : {}) },
      },
      signal,
    );
    return { keys: result.outputs.map((o) => o.key), cost: usageCost(model as MediaModelDefinition, result.usage) };
  }
}
