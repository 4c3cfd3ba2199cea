import { Body, Controller, HttpCode, Inject, Logger, Post, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CurrentCaller, NamespaceAccess, type Caller } from '@atelier/auth';
import { CreditLedger } from '@atelier/billing';
import { IMAGE_RENDER_QUEUE, VIDEO_RENDER_QUEUE, type MediaRenderResult } from '@atelier/contracts';
import { requestedUsage, resolveMediaModel, usageCost, validateMediaParams } from '@atelier/engines';
import { ModelCatalog, type ModelEndpoint } from '@atelier/models';
import { Metrics } from '@atelier/observability';
import { nowOrOnceBack, RpcClient } from '@atelier/runtime';
import { BlobStore, SignedUrls } from '@atelier/storage';

/** How often TCP keep-alive probes go out while a long render is waiting (NATs and load balancers drop silent connections). */
const KEEPALIVE_PROBE_MS = 30_000;

/**
 * POST /api/ai/images/generate, /images/edit and /videos/generate: synchronous generation.
 * Validates the public body, reserves the price, hands the work to the media service over its
 * image or video queue, then settles (or releases) and answers with temporary links or base64.
 */
@Controller('api/ai')
export class MediaController {
  private readonly logger = new Logger(MediaController.name);

  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    private readonly access: NamespaceAccess,
    private readonly ledger: CreditLedger,
    private readonly rpc: RpcClient,
    private readonly urls: SignedUrls,
    private readonly blobs: BlobStore,
    private readonly metrics: Metrics,
  ) {}

  @Post('images/generate')
  @HttpCode(200)
  generateImage(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    return this.render('/images/generate', caller, body, req, reply);
  }

  @Post('images/edit')
  @HttpCode(200)
  editImage(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    return this.render('/images/edit', caller, body, req, reply);
  }

  @Post('videos/generate')
  @HttpCode(200)
  generateVideo(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    return this.render('/videos/generate', caller, body, req, reply);
  }

  private async render(endpoint: ModelEndpoint, caller: Caller, body: unknown, req: FastifyRequest, reply: FastifyReply) {
    const model = resolveMediaModel(this.catalog, body, endpoint);
    const params = validateMediaParams(model, body);
    const scope = await this.access.resolve(caller, params.target_namespace);
    const socket = req.raw.socket as { setKeepAlive?: (enable: boolean, delayMs: number) => void } | undefined;
    socket?.setKeepAlive?.(true, KEEPALIVE_PROBE_MS);
    const reservation = await this.ledger.reserve(scope.id, usageCost(model, requestedUsage(model, params)), `${endpoint}:${model.id}:${req.id}`);

    // A client that hangs up cancels the job wherever it runs (ffmpeg killed, upstream call aborted).
    const gone = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableFinished) gone.abort();
    };
    reply.raw.on('close', onClose);
    // Gone already (while validating or reserving): do not start work nobody will receive.
    if (req.raw.socket?.destroyed === true) gone.abort();
    let result: MediaRenderResult;
    try {
      result = await this.rpc.call(
        endpoint === '/videos/generate' ? VIDEO_RENDER_QUEUE : IMAGE_RENDER_QUEUE,
        { caller: { userId: caller.userId, username: caller.username, namespaceId: scope.id, namespace: scope.name, requestId: req.id }, model: model.id, params },
        { signal: gone.signal },
      );
    } catch (err) {
      this.metrics.generations.inc({ model: model.id, outcome: gone.signal.aborted ? 'cancelled' : 'failed', mode: 'sync' });
      // Nothing was produced (or nobody is left to receive it): nothing is charged.
      await this.closeReservation(reservation.id, () => this.ledger.release(reservation.id));
      throw err;
    } finally {
      reply.raw.off('close', onClose);
    }
    this.metrics.generations.inc({ model: model.id, outcome: 'succeeded', mode: 'sync' });
    const [items] = await Promise.all([
      Promise.all(
        result.outputs.map(async (o) => (params.response_format === 'b64_json' ? { b64_json: await this.base64(o.key) } : { url: this.urls.url(o.key) })),
      ),
      this.closeReservation(reservation.id, () => this.ledger.settle(reservation.id, usageCost(model, result.usage))),
    ]);
    // Lets clients (and bench:media) tell generation time from the service's own overhead.
    reply.header('server-timing', `engine;dur=${result.engineMs.toFixed(1)}, total;dur=${reply.elapsedTime.toFixed(1)}`);
    return {
      model: result.model,
      created: result.created,
      [endpoint === '/videos/generate' ? 'videos' : 'images']: items,
      ...(result.seed !== undefined && { seed: result.seed }),
    };
  }

  /**
   * Settles or releases without failing the answer: the output exists, so an outage of Postgres
   * must neither withhold it nor leave it unbilled. The (idempotent) step is retried in the
   * background until the database is back.
   */
  private async closeReservation(id: string, close: () => Promise<unknown>): Promise<void> {
    await nowOrOnceBack(close, {
      maxWaitMs: 10 * 60_000,
      onWait: (service) => this.logger.warn(`${service} unavailable; reservation ${id} will be closed when it is back`),
      onLater: () => undefined,
      onFailure: (err) => this.logger.error(`closing reservation ${id} failed: ${(err as Error).message}`),
    });
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
