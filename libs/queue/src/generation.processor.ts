import { Injectable, Logger } from '@nestjs/common';
import { IMAGE_GENERATION_QUEUE, VIDEO_GENERATION_QUEUE, type GenerationJob } from '@atelier/contracts';
import { HandlesQueue, type JobContext, type JobHandler } from '@atelier/runtime';
import { GenerationRunner } from './generation-runner';

/** Shared by both pools: run the generation; after the last attempt, fail it for good. */
@Injectable()
abstract class GenerationProcessor implements JobHandler<typeof IMAGE_GENERATION_QUEUE | typeof VIDEO_GENERATION_QUEUE> {
  private readonly logger = new Logger('GenerationProcessor');

  constructor(private readonly runner: GenerationRunner) {}

  async handle(payload: GenerationJob, ctx: JobContext): Promise<void> {
    try {
      await this.runner.run(payload.generationId, ctx.signal);
    } catch (err) {
      const attempts = ctx.job.opts.attempts ?? 1;
      this.logger.warn(`Generation ${payload.generationId} attempt ${ctx.attempt}/${attempts} failed: ${(err as Error).message}`);
      if (ctx.attempt >= attempts)
        await this.runner.failDurably(payload.generationId, 'The generation failed because of an internal error; no credits were charged', ctx.signal);
      throw err;
    }
  }
}

@HandlesQueue(IMAGE_GENERATION_QUEUE)
export class ImageGenerationProcessor extends GenerationProcessor {}

@HandlesQueue(VIDEO_GENERATION_QUEUE)
export class VideoGenerationProcessor extends GenerationProcessor {}
