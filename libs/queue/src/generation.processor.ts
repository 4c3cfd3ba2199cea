import { Injectable, Logger } from '@nestjs/common';
import { IMAGE_GENERATION_QUEUE, VIDEO_GENERATION_QUEUE, type GenerationJob } from '@atelier/contracts';
import { HandlesQueue, type JobContext, type JobHandler } from '@atelier/runtime';
import { GenerationRunner } from './generation-runner';
import { NamespaceShare } from './namespace-share';

/** How soon a generation held back by its namespace's share is offered to a worker again. */
const OVER_SHARE_RETRY_MS = 250;

/** Shared by both pools: run the generation; after the last attempt, fail it for good. */
@Injectable()
abstract class GenerationProcessor implements JobHandler<typeof IMAGE_GENERATION_QUEUE | typeof VIDEO_GENERATION_QUEUE> {
  private readonly logger = new Logger('GenerationProcessor');
  protected abstract readonly pool: 'image' | 'video';

  constructor(
    private readonly runner: GenerationRunner,
    private readonly share: NamespaceShare,
  ) {}

  async handle(payload: GenerationJob, ctx: JobContext): Promise<void> {
    const namespaceId = payload.namespaceId;
    if (namespaceId !== undefined && !(await this.share.enter(this.pool, namespaceId))) await ctx.defer(OVER_SHARE_RETRY_MS);
    try {
      await this.runner.run(payload.generationId, ctx.signal);
    } catch (err) {
      const attempts = ctx.job.opts.attempts ?? 1;
      this.logger.warn(`Generation ${payload.generationId} attempt ${ctx.attempt}/${attempts} failed: ${(err as Error).message}`);
      if (ctx.attempt >= attempts)
        await this.runner.failDurably(payload.generationId, 'The generation failed because of an internal error; no credits were charged', ctx.signal);
      throw err;
    } finally {
      if (namespaceId !== undefined) this.share.leave(this.pool, namespaceId);
    }
  }
}

@HandlesQueue(IMAGE_GENERATION_QUEUE)
export class ImageGenerationProcessor extends GenerationProcessor {
  protected readonly pool = 'image';
}

@HandlesQueue(VIDEO_GENERATION_QUEUE)
export class VideoGenerationProcessor extends GenerationProcessor {
  protected readonly pool = 'video';
}
