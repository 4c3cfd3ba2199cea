import { Body, Controller, Get, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CountsAsWork, CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { IDEMPOTENT } from '@atelier/idempotency';
import { abortWhenGone, openEventStream, sseFrame } from '@atelier/runtime';
import { MessagesService } from './messages.service';

/**
 * Anthropic's Messages API, for its SDK and Claude Code (base URL `<atelier>/api/anthropic`):
 * POST /v1/messages (JSON or server-sent events; `?beta=true`, which Claude Code adds, changes
 * nothing), count_tokens and the model list. Keys come as `x-api-key` or `Authorization: Bearer`;
 * every error is in Anthropic's envelope (rewritten for these routes in the runtime's onSend hook).
 */
@Controller('api/anthropic/v1')
@RequiresScope('chat')
export class MessagesController {
  constructor(private readonly messages: MessagesService) {}

  /** A stream opens with its first event, so a refusal before it is an ordinary HTTP error; after it, an error event ends it. */
  @Post('messages')
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  async create(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const gone = abortWhenGone(req, reply);
    const extra: Record<string, string> = { 'request-id': req.id };
    try {
      await this.messages.create(caller, body, req.id, {
        signal: gone.signal,
        header: (name, value) => {
          extra[name] = value;
          void reply.header(name, value);
        },
        event: (event) => {
          if (gone.signal.aborted) return;
          openEventStream(req, reply, extra);
          reply.raw.write(sseFrame(JSON.stringify(event), event.type));
        },
        end: () => {
          if (reply.sent) reply.raw.end();
        },
        json: async (message) => {
          await reply.status(200).header('content-type', 'application/json; charset=utf-8').send(message);
        },
      }, typeof req.headers['anthropic-beta'] === 'string' ? req.headers['anthropic-beta'] : undefined);
    } finally {
      gone.release();
    }
  }

  /** Free, and a read for rate limits. */
  @Post('messages/count_tokens')
  @HttpCode(200)
  countTokens(@CurrentCaller() caller: Caller, @Body() body: unknown) {
    return this.messages.countTokens(caller, body);
  }

  @Get('models')
  listModels(@Query() query: Record<string, unknown>) {
    return this.messages.listModels(query);
  }

  @Get('models/:id')
  getModel(@Param('id') id: string) {
    return this.messages.getModel(id);
  }
}
