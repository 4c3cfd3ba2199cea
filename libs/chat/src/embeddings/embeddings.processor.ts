import { EMBEDDINGS_QUEUE, type EmbeddingsJob, type EmbeddingsOutcome } from '@atelier/contracts';
import { HandlesQueue, type JobContext, type JobHandler } from '@atelier/runtime';
import { EmbeddingsRunner } from './embeddings.runner';

/** Consumes embeddings jobs; ctx.signal (the caller went away) cuts the upstream calls too. */
@HandlesQueue(EMBEDDINGS_QUEUE)
export class EmbeddingsProcessor implements JobHandler<typeof EMBEDDINGS_QUEUE> {
  constructor(private readonly runner: EmbeddingsRunner) {}

  handle(job: EmbeddingsJob, ctx: JobContext): Promise<EmbeddingsOutcome> {
    return this.runner.run(job, ctx.signal);
  }
}
