import { Body, Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CurrentCaller, type Caller } from '@atelier/auth';
import { ChatCompletionsService, type PreparedChat } from '@atelier/chat';
import { toErrorResponse } from '@atelier/runtime';

/**
 * POST /api/ai/chat/completions, OpenAI-compatible. Validation, the credit reservation and the
 * settlement live in ChatCompletionsService; this controller only speaks HTTP: JSON or
 * server-sent events, and a client that goes away aborts the job (and the upstream call).
 */
@Controller('api/ai/chat')
export class ChatController {
  constructor(private readonly chat: ChatCompletionsService) {}

  @Post('completions')
  @HttpCode(200)
  async create(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const prepared = await this.chat.prepare(caller, body, req.id);
    const gone = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableFinished) gone.abort();
    };
    reply.raw.on('close', onClose);
    // Gone already (while validating or reserving): do not start work nobody will receive.
    if (req.raw.socket?.destroyed === true) gone.abort();
    try {
      if (prepared.request.stream) await this.stream(prepared, req, reply, gone.signal);
      else await this.complete(prepared, reply, gone.signal);
    } finally {
      reply.raw.off('close', onClose);
    }
  }

  private async complete(prepared: PreparedChat, reply: FastifyReply, signal: AbortSignal): Promise<void> {
    let outcome;
    try {
      outcome = await this.chat.run(prepared, { signal });
    } catch (error) {
      // Nothing was delivered, so nothing is charged.
      await this.chat.finish(prepared, { status: signal.aborted ? 'cancelled' : 'failed', error });
      throw error;
    }
    await reply.status(200).header('content-type', 'application/json; charset=utf-8').send(outcome.completion);
    // Settled right after the answer went out, off the caller's latency; the reservation
    // already guaranteed the credits.
    await this.chat.finish(prepared, { status: 'succeeded', usage: outcome.usage, provider: outcome.provider });
  }

  /**
   * Headers go out with the first chunk, so a failure before it (bad media URL, every provider
   * down) is still an ordinary HTTP error. After it, a failure ends the stream with an error
   * event and no [DONE], so clients (the OpenAI SDK included) cannot mistake it for a
   * complete answer.
   */
  private async stream(prepared: PreparedChat, req: FastifyRequest, reply: FastifyReply, signal: AbortSignal): Promise<void> {
    const sent: string[] = [];
    const open = () => {
      if (reply.sent) return;
      reply.hijack();
      reply.raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
        'x-request-id': req.id,
      });
    };
    const onChunk = (chunk: unknown) => {
      if (signal.aborted) return;
      const data = typeof chunk === 'string' ? chunk : JSON.stringify(chunk);
      open();
      sent.push(data);
      reply.raw.write(`data: ${data}\n\n`);
    };
    let outcome;
    try {
      outcome = await this.chat.run(prepared, { signal, onChunk });
    } catch (error) {
      // What reached the client is billed: the prompt and the tokens streamed so far.
      await this.chat.finish(prepared, {
        status: signal.aborted ? 'cancelled' : 'failed',
        usage: sent.length > 0 ? this.chat.deliveredUsage(prepared, sent) : undefined,
        error,
      });
      if (!reply.sent) throw error;
      if (!signal.aborted) reply.raw.write(`data: ${JSON.stringify(toErrorResponse(error).body)}\n\n`);
      reply.raw.end();
      return;
    }
    open();
    reply.raw.end('data: [DONE]\n\n');
    await this.chat.finish(prepared, { status: 'succeeded', usage: outcome.usage, provider: outcome.provider });
  }
}
