import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { ApiError, parseImageStyle, type ImageStyle, type MediaRenderJob, type MediaRenderOutput, type MediaRenderResult } from '@atelier/contracts';
import { ModelCatalog, type MediaModelDefinition } from '@atelier/models';
import { Metrics } from '@atelier/observability';
import { BlobStore, outputKey, ParsedBlobs } from '@atelier/storage';
import { throwIfAborted } from './engine-errors';
import { EngineRegistry } from './engine-registry';
import { requestedUsage } from './pricing';

/**
 * Runs one media generation end to end: engine (with cancellation), then storage of every
 * output under the billed namespace (and target repo/directory). Shared by the synchronous
 * media service and the queue worker; it knows nothing about HTTP.
 */
@Injectable()
export class MediaRenderer {
  private readonly logger = new Logger(MediaRenderer.name);

  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly engines: EngineRegistry,
    private readonly blobs: BlobStore,
    @Optional() private readonly metrics?: Metrics,
  ) {
    this.styles = new ParsedBlobs(blobs, parseImageStyle, 64);
  }

  /** Deployed atelier/local-image fine-tunes' learned styles, loaded once. */
  private readonly styles: ParsedBlobs<ImageStyle>;

  model(id: string): MediaModelDefinition {
    const model = this.catalog.get(id);
    if (!model) throw new ApiError('resource_not_found', `Model not found: ${id}`);
    if (model.endpoint === '/chat/completions') throw ApiError.badRequest(`Model ${id} is a chat model, not a media model`);
    if (model.endpoint === '/embeddings') throw ApiError.badRequest(`Model ${id} is an embedding model, not a media model`);
    return model;
  }

  async render(job: MediaRenderJob, signal: AbortSignal, onProgress?: (fraction: number) => void): Promise<MediaRenderResult> {
    const serving = this.model(job.model);
    // A deployed fine-tune renders with its serving model's engine, under its own name, in its learned style.
    const model = job.deployed ? { ...serving, id: job.deployed.name } : serving;
    const style = job.deployed ? await this.styles.get(job.deployed.adapter.key) : undefined;
    const started = performance.now();
    const engine = this.engines.engineFor(model);
    const run = () => engine.run({ model, params: job.params, signal, onProgress, ...(style && { style }) });
    // Labelled by engine type: remote providers' latency is what this mostly shows (builtin = local engines).
    const result = this.metrics ? await this.metrics.timeUpstream(model.engine.type, run) : await run();
    const engineMs = performance.now() - started;
    throwIfAborted(signal);

    const id = randomUUID();
    const now = new Date();
    const outputs: MediaRenderOutput[] = [];
    for (const [i, out] of result.outputs.entries()) {
      const file = `${id}${result.outputs.length > 1 ? `-${i + 1}` : ''}.${out.extension}`;
      const key = outputKey({ namespace: job.caller.namespace, ...job.target }, file, now);
      const stored = await this.blobs.put(key, out.data, out.contentType);
      outputs.push({
        key,
        contentType: out.contentType,
        size: stored.size,
        ...(out.width !== undefined && { width: out.width }),
        ...(out.height !== undefined && { height: out.height }),
        ...(out.durationSeconds !== undefined && { durationSeconds: out.durationSeconds }),
      });
    }
    const isVideo = model.endpoint === '/videos/generate';
    // Providers that do not report a video's length are billed for the length that was asked for.
    const videoSeconds = isVideo
      ? result.outputs.reduce((sum, o) => sum + (o.durationSeconds ?? 0), 0) || requestedUsage(model, job.params).videoSeconds
      : 0;
    this.logger.log(
      `${model.id} for ${job.caller.namespace} (request ${job.caller.requestId}): ${outputs.length} file(s) in ${Math.round(engineMs)} ms, seed ${result.seed ?? '-'}`,
    );
    return {
      model: model.id,
      created: Math.floor(now.getTime() / 1000),
      outputs,
      ...(result.seed !== undefined && { seed: result.seed }),
      usage: { images: isVideo ? 0 : outputs.length, videoSeconds },
      engineMs,
    };
  }
}
