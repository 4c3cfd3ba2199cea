import { CHAT_COMPLETION_QUEUE, type ChatCompletionJob, type ChatCompletionOutcome } from '@atelier/contracts';
import { HandlesQueue, type JobContext, type JobHandler } from '@atelier/runtime';
import { ChatCompletionRunner } from './chat-completion.runner';

/**
 * Consumes chat-completion jobs: runs the model and streams chunks back to the waiting gateway
 * (ctx.sendChunk). ctx.signal is aborted when the caller goes away; the providers pass it to the
 * upstream request, so the upstream call is cut too.
 */
@HandlesQueue(CHAT_COMPLETION_QUEUE)
export class ChatCompletionProcessor implements JobHandler<typeof CHAT_COMPLETION_QUEUE> {
  constructor(private readonly runner: ChatCompletionRunner) {}

  handle(job: ChatCompletionJob, ctx: JobContext): Promise<ChatCompletionOutcome> {
    return this.runner.run(job, { signal: ctx.signal, sendChunk: (chunk) => ctx.sendChunk(chunk) });
  }
}
