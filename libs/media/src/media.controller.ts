import { Body, Controller, HttpCode, Inject, Post, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CountsAsWork, CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { abortWhenGone } from '@atelier/runtime';
import { MediaGenerations, type MediaEndpoint } from './media-generation.service';
import { fromOpenAiImageRequest, toOpenAiImagesAnswer } from './openai-images';
import { openAiEditForm } from './openai-edit-form';
import { RouteConfig } from '@nestjs/platform-fastify';
import { IDEMPOTENT, IDEMPOTENT_AFTER_BODY, IdempotentRequests } from '@atelier/idempotency';

/** How often TCP keep-alive probes go out while a long render is waiting (NATs and load balancers drop silent connections). */
const KEEPALIVE_PROBE_MS = 30_000;

/**
 * POST /api/ai/images/generate, /images/edit and /videos/generate: synchronous generation.
 * The work and its billing live in MediaGenerations; this controller only speaks HTTP: a long
 * render keeps its connection alive, and a client that hangs up cancels the job.
 */
@Controller('api/ai')
export class MediaController {
  constructor(
    private readonly media: MediaGenerations,
    private readonly idempotency: IdempotentRequests,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Post('images/generate')
  @CountsAsWork()
  @RequiresScope('images')
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  generateImage(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply) {
    return this.render('/images/generate', caller, body, req, reply);
  }

  @Post('images/edit')
  @CountsAsWork()
  @RequiresScope('images')
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  editImage(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply) {
    return this.render('/images/edit', caller, body, req, reply);
  }

  /** OpenAI's Images API on the same base URL (`client.images.generate`): the contract's images/generate underneath. */
  @Post('images/generations')
  @CountsAsWork()
  @RequiresScope('images')
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  generations(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply) {
    return this.render('/images/generate', caller, fromOpenAiImageRequest(body), req, reply, toOpenAiImagesAnswer);
  }

  /**
   * OpenAI's image edits (`client.images.edit`, multipart with the image file): images/edit
   * underneath, the file passed as a data URI. An Idempotency-Key is claimed once the form is
   * read, with a digest of it (fields, and each image's SHA-256) standing for the body.
   */
  @Post('images/edits')
  @CountsAsWork()
  @RequiresScope('images')
  @RouteConfig(IDEMPOTENT_AFTER_BODY)
  @HttpCode(200)
  async edits(@CurrentCaller() caller: Caller, @Req() req: FastifyRequest, @Res() reply: FastifyReply) {
    const { fields, images, digest } = await openAiEditForm(req, this.config);
    if (!(await this.idempotency.claimAfterBody(req, reply, caller.userId, digest))) return;
    return this.render('/images/edit', caller, fromOpenAiImageRequest(fields, images), req, reply, toOpenAiImagesAnswer);
  }

  @Post('videos/generate')
  @CountsAsWork()
  @RequiresScope('videos')
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  generateVideo(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply) {
    return this.render('/videos/generate', caller, body, req, reply);
  }

  /** The answer is sent as soon as it exists; the handler ends once its charge has landed (MediaGenerations.render). */
  private async render(
    endpoint: MediaEndpoint,
    caller: Caller,
    body: unknown,
    req: FastifyRequest,
    reply: FastifyReply,
    shape: (answer: Record<string, unknown>) => unknown = (answer) => answer,
  ): Promise<void> {
    const gone = abortWhenGone(req, reply, { keepAliveProbeMs: KEEPALIVE_PROBE_MS });
    try {
      await this.media.render(endpoint, caller, body, req.id, gone.signal, async (answer) => {
        // Lets clients (and bench:media) tell generation time from the service's own overhead.
        reply.header('server-timing', `engine;dur=${answer.engineMs.toFixed(1)}, total;dur=${reply.elapsedTime.toFixed(1)}`);
        await reply.status(200).header('content-type', 'application/json; charset=utf-8').send(shape(answer.body));
      });
    } finally {
      gone.release();
    }
  }
}
