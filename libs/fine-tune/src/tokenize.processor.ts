import { FINE_TUNE_TOKENIZE_QUEUE, type FineTuneTokenizeJob } from '@atelier/contracts';
import { HandlesQueue, type JobContext, type JobHandler } from '@atelier/runtime';
import { FineTuneTokenization } from './fine-tune-tokenization.service';

/** Consumes fine-tune-tokenize: one job per POST .../tokenize. */
@HandlesQueue(FINE_TUNE_TOKENIZE_QUEUE)
export class TokenizeProcessor implements JobHandler<typeof FINE_TUNE_TOKENIZE_QUEUE> {
  constructor(private readonly tokenization: FineTuneTokenization) {}

  handle(payload: FineTuneTokenizeJob, ctx: JobContext): Promise<void> {
    return this.tokenization.run(payload.fineTuneId, { signal: ctx.signal, finalAttempt: ctx.attempt >= (ctx.job.opts.attempts ?? 1) });
  }
}
