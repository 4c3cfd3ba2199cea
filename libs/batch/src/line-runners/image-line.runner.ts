import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { IMAGE_RENDER_QUEUE } from '@atelier/contracts';
import { fromOpenAiImageRequest, requestedUsage, usageCost, validateMediaParams } from '@atelier/media';
import { ModelCatalog, type MediaModelDefinition, type ModelDefinition } from '@atelier/models';
import { RpcClient } from '@atelier/runtime';
import { BlobStore, SignedUrls } from '@atelier/storage';
import { discounted } from '../batch-pricing';
import type { BatchLineRunner, LineAnswer, LineCaller, LinePlan } from './batch-line-runner';
import { planned } from './chat-line.runner';

/**
 * `/v1/images/generations` lines: OpenAI's Images body as the images route reads it, priced at
 * the model's image price less the batch discount, rendered by the media service. Images come
 * back as `b64_json` unless the line asks for `url` (a signed link, valid RESULT_URL_TTL_SECONDS:
 * a batch's output outlives it).
 */
@Injectable()
export class ImageLineRunner implements BatchLineRunner {
  constructor(
    private readonly catalog: ModelCatalog,
    private readonly rpc: RpcClient,
    private readonly blobs: BlobStore,
    private readonly urls: SignedUrls,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'BATCH_DISCOUNT'>,
  ) {}

  model(name: string): MediaModelDefinition | undefined {
    const model = this.catalog.get(name);
    return model?.endpoint === '/images/generate' ? model : undefined;
  }

  private params(model: MediaModelDefinition, raw: Record<string, unknown>): Record<string, unknown> {
    const body = fromOpenAiImageRequest(structuredClone(raw));
    body.response_format ??= 'b64_json';
    return validateMediaParams(model, body);
  }

  plan(model: ModelDefinition, raw: Record<string, unknown>): LinePlan {
    const media = model as MediaModelDefinition;
    return planned(() => {
      const params = this.params(media, raw);
      return { body: raw, estimate: discounted(usageCost(media, requestedUsage(media, params)), media, this.config.BATCH_DISCOUNT) };
    });
  }

  async run(model: ModelDefinition, raw: Record<string, unknown>, caller: LineCaller, ids: { requestId: string; reservationId: string }): Promise<LineAnswer> {
    const media = model as MediaModelDefinition;
    const params = this.params(media, raw);
    const result = await this.rpc.call(IMAGE_RENDER_QUEUE, {
      caller: { userId: caller.userId, username: '', namespaceId: caller.namespaceId, namespace: caller.namespace, requestId: ids.requestId },
      model: media.id,
      params,
    });
    const data = await Promise.all(result.outputs.map(async (o) => (params.response_format === 'url' ? { url: this.urls.url(o.key) } : { b64_json: await this.base64(o.key) })));
    return {
      body: { created: result.created, data },
      inputTokens: 0,
      outputTokens: 0,
      images: result.usage.images,
      cost: discounted(usageCost(media, result.usage), media, this.config.BATCH_DISCOUNT),
      provider: null,
    };
  }

  private async base64(key: string): Promise<string> {
    const blob = await this.blobs.get(key);
    if (!blob) throw new Error(`stored output ${key} is missing`);
    const chunks: Buffer[] = [];
    for await (const chunk of blob.body as AsyncIterable<Buffer>) chunks.push(chunk);
    return Buffer.concat(chunks).toString('base64');
  }
}
