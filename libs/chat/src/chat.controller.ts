import { Body, Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CountsAsWork, CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { ChatCompletionsService } from './chat-completions.service';
import { abortWhenGone, openEventStream, sseFrame, toErrorResponse } from '@atelier/runtime';
import { RouteConfig } from '@nestjs/platform-fastify';
import { IDEMPOTENT } from '@atelier/idempotency';

/**
 * POST /api/ai/chat/completions, OpenAI-compatible. Validation, the credit reservation, what a
 * failure bills and the settlement live in ChatCompletionsService; this controller only speaks
 * HTTP: JSON or server-sent events, and a client that goes away aborts the job (and the
 * upstream call).
 */
@Controller('api/ai/chat')
@RequiresScope('chat')
export class ChatController {
  constructor(private readonly chat: ChatCompletionsService) {}

  /**
   * Stream headers go out with the first chunk, so a failure before it (bad media URL, every
   * provider down) is still an ordinary HTTP error. After it, a failure ends the stream with an
   * error event and no [DONE], so clients (the OpenAI SDK included) cannot mistake it for a
   * complete answer.
   */
  @Post('completions')
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  async create(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const gone = abortWhenGone(req, reply);
    const extra: Record<string, string> = {};
    const openStream = () => openEventStream(req, reply, extra);
    try {
      await this.chat.create(caller, body, req.id, {
        signal: gone.signal,
        header: (name, value) => {
          // On the reply for JSON answers and errors; kept for the stream's own head.
          extra[name] = value;
          void reply.header(name, value);
        },
        chunk: (data) => {
          openStream();
          reply.raw.write(sseFrame(data));
        },
        deliver: async (completion) => {
          if (completion !== null) {
            await reply.status(200).header('content-type', 'application/json; charset=utf-8').send(completion);
            return;
          }
          openStream();
          reply.raw.end(sseFrame('[DONE]'));
        },
      });
    } catch (error) {
      if (!reply.sent) throw error;
      if (!gone.signal.aborted) reply.raw.write(sseFrame(JSON.stringify(toErrorResponse(error).body)));
      reply.raw.end();
    } finally {
      gone.release();
    }
  }
}
