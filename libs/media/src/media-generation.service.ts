import { Inject, Injectable } from '@nestjs/common';
import { NamespaceAccess, type Caller } from '@atelier/auth';
import { chargeTags, PaidRequests, reservationReference } from '@atelier/billing';
import { ApiError, IMAGE_RENDER_QUEUE, VIDEO_RENDER_QUEUE, type MediaRenderJob, type MediaRenderResult } from '@atelier/contracts';
import { DeployedModels, deployedDefinition, ModelCatalog, type MediaModelDefinition, type ModelEndpoint } from '@atelier/models';
import { Metrics } from '@atelier/observability';
import { randomToken } from '@atelier/random';
import { RpcClient } from '@atelier/runtime';
import { BlobStore, SignedUrls } from '@atelier/storage';
import { requestedUsage, usageCost } from './pricing';
import { resolveMediaModel, validateMediaParams } from './media-request';

export type MediaEndpoint = Exclude<ModelEndpoint, '/chat/completions' | '/embeddings'>;

export interface MediaAnswer {
  body: Record<string, unknown>;
  /** Time the engine took, so the overhead of the synchronous path can be told apart. */
  engineMs: number;
}

/**
 * The gateway's side of a synchronous generation (images/generate, images/edit,
 * videos/generate): validation with the spec's texts, the paid-request lifecycle around the
 * hand-off to the media service, and the answer with temporary links or base64.
 */
@Injectable()
export class MediaGenerations {
  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly access: NamespaceAccess,
    private readonly paid: PaidRequests,
    private readonly rpc: RpcClient,
    private readonly urls: SignedUrls,
    private readonly blobs: BlobStore,
    private readonly metrics: Metrics,
    private readonly deployedModels: DeployedModels,
  ) {}

  /**
   * The catalog model named in the body, else a deployed atelier/local-image fine-tune of that name
   * the caller may call (looked up only then), else the catalog's 404.
   */
  private async mediaModel(caller: Caller, body: unknown, endpoint: MediaEndpoint): Promise<{ model: MediaModelDefinition; deployed?: MediaRenderJob['deployed'] & { serving: string } }> {
    try {
      return { model: resolveMediaModel(this.catalog, body, endpoint) };
    } catch (err) {
      if (!(err instanceof ApiError && err.type === 'resource_not_found')) throw err;
      const found = await this.deployedModels.resolve(caller, String((body as { model: unknown }).model), (ns) => this.access.canAccess(caller, ns));
      if (!found || found.serving.endpoint !== endpoint || found.adapter.kind !== 'style') throw err;
      return { model: deployedDefinition(found) as MediaModelDefinition, deployed: { name: found.name, adapter: found.adapter, serving: found.serving.id } };
    }
  }

  /**
   * Validates, reserves, renders, hands the answer to `deliver`, then settles: the charge lands
   * right after the answer went out, off the caller's latency (the reservation already holds
   * the credits; PaidRequests.close never throws and waits out an outage in the background).
   * `signal` aborts the render wherever it runs.
   */
  async render(
    endpoint: MediaEndpoint,
    caller: Caller,
    body: unknown,
    requestId: string,
    signal: AbortSignal,
    deliver: (answer: MediaAnswer) => Promise<void>,
  ): Promise<void> {
    const validating = this.metrics.stage('media.validate');
    const { model, deployed } = await this.mediaModel(caller, body, endpoint);
    const params = validateMediaParams(model, body);
    const scope = await this.access.resolve(caller, params.target_namespace);
    validating();
    // The render may start while the credits are being held (PaidRequests.reserveAndStart); its
    // result is only used once they are.
    const { reservation, work: rendering } = await this.paid.reserveAndStart(
      scope.id,
      usageCost(model, requestedUsage(model, params)),
      // Server-made and unique: the reference is this request's max_concurrent slot, and a
      // client's X-Request-Id (correlation only) repeated across requests once shared one slot.
      reservationReference('media', endpoint, model.id, scope.id, randomToken(16)),
      chargeTags(caller, model.id, `/api/ai${endpoint}`),
      { stage: 'media.reserve', signal },
      (callSignal) =>
        this.metrics.timed('media.rpc', () =>
          this.rpc.call(
            endpoint === '/videos/generate' ? VIDEO_RENDER_QUEUE : IMAGE_RENDER_QUEUE,
            {
              caller: { userId: caller.userId, username: caller.username, namespaceId: scope.id, namespace: scope.name, requestId },
              model: deployed?.serving ?? model.id,
              ...(deployed && { deployed: { name: deployed.name, adapter: deployed.adapter } }),
              params,
            },
            { signal: callSignal },
          ),
        ),
    );
    let result: MediaRenderResult;
    try {
      result = await rendering;
    } catch (err) {
      this.metrics.generations.inc({ model: model.id, outcome: signal.aborted ? 'cancelled' : 'failed', mode: 'sync' });
      // Nothing was produced (or nobody is left to receive it): nothing is charged.
      await this.paid.close(reservation, null);
      throw err;
    }
    this.metrics.generations.inc({ model: model.id, outcome: 'succeeded', mode: 'sync' });
    const settle = () => this.metrics.timed('media.settle', () => this.paid.close(reservation, usageCost(model, result.usage), result.usage));
    let items: Record<string, unknown>[];
    try {
      items = await Promise.all(
        result.outputs.map(async (o) => (params.response_format === 'b64_json' ? { b64_json: await this.base64(o.key) } : { url: this.urls.url(o.key) })),
      );
    } catch (err) {
      // Produced but not readable back: the render is charged as before, the caller gets the error.
      await settle();
      throw err;
    }
    await deliver({
      engineMs: result.engineMs,
      body: {
        model: result.model,
        created: result.created,
        [endpoint === '/videos/generate' ? 'videos' : 'images']: items,
        ...(result.seed !== undefined && { seed: result.seed }),
      },
    });
    await settle();
  }

  /** b64_json answers read the stored output back: bytes never travel through Redis. */
  private async base64(key: string): Promise<string> {
    const blob = await this.blobs.get(key);
    if (!blob) throw new Error(`stored output ${key} is missing`);
    const chunks: Buffer[] = [];
    for await (const chunk of blob.body as AsyncIterable<Buffer>) chunks.push(chunk);
    return Buffer.concat(chunks).toString('base64');
  }
}
