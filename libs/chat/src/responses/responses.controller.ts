import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CountsAsWork, CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { IDEMPOTENT } from '@atelier/idempotency';
import { abortWhenGone, openEventStream, sseFrame } from '@atelier/runtime';
import { fieldError } from './responses-request';
import { listPage } from '../list-page';
import { BackgroundResponses, type FollowDelivery } from './background-responses.service';
import type { ResponseObject } from './response-output';
import { ResponsesService, type ResponsesDelivery } from './responses.service';

/** A background response's kept events, as server-sent events on this reply. */
function followDelivery(req: FastifyRequest, reply: FastifyReply, signal: AbortSignal): FollowDelivery {
  return {
    signal,
    event: (event) => {
      if (signal.aborted) return;
      openEventStream(req, reply, {});
      reply.raw.write(sseFrame(JSON.stringify(event), event.type));
    },
    end: () => {
      if (reply.sent) reply.raw.end();
    },
  };
}

/**
 * The OpenAI Responses API: POST /api/ai/responses (JSON or server-sent events), and the stored
 * answers' GET, DELETE and input_items. The work is ResponsesService's, on the chat lifecycle.
 */
@Controller('api/ai/responses')
@RequiresScope('chat')
export class ResponsesController {
  constructor(
    private readonly responses: ResponsesService,
    private readonly background: BackgroundResponses,
  ) {}

  /**
   * A stream opens with its first event, so a refusal before it is an ordinary HTTP error; after
   * it, a failure ends the stream with response.failed.
   */
  @Post()
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  async create(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const gone = abortWhenGone(req, reply);
    const extra: Record<string, string> = {};
    try {
      const delivery = {
        signal: gone.signal,
        // An empty value takes back a header set earlier (a native upstream runs tools the translation would drop).
        header: (name, value) => {
          if (value === '') {
            delete extra[name];
            void reply.removeHeader(name);
            return;
          }
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
        json: async (response: ResponseObject) => {
          await reply.status(200).header('content-type', 'application/json; charset=utf-8').send(response);
        },
      } satisfies ResponsesDelivery;
      if ((body as { background?: unknown } | null)?.background === true)
        await this.background.start(caller, body, req.id, { ...delivery, follow: followDelivery(req, reply, gone.signal) });
      else await this.responses.create(caller, body, req.id, delivery);
    } finally {
      gone.release();
    }
  }

  /** Cancels a background response: charged only for what ran. */
  @Post(':id/cancel')
  @HttpCode(200)
  cancel(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.background.cancel(caller, id);
  }

  /** A stored response; with `stream=true` a background response's events, resumed after `starting_after`. */
  @Get(':id')
  async get(@CurrentCaller() caller: Caller, @Param('id') id: string, @Query() query: Record<string, unknown>, @Req() req: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    if (query.stream !== 'true') return this.responses.get(caller, id);
    const after = query.starting_after === undefined ? -1 : Number(query.starting_after);
    if (!Number.isInteger(after) || after < -1) throw fieldError('starting_after', 'starting_after must be an event sequence_number (an integer, 0 or more)');
    const gone = abortWhenGone(req, reply);
    try {
      await this.background.follow(caller, id, after, followDelivery(req, reply, gone.signal));
    } finally {
      gone.release();
    }
    return undefined;
  }

  @Delete(':id')
  delete(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.responses.delete(caller, id);
  }

  @Get(':id/input_items')
  inputItems(@CurrentCaller() caller: Caller, @Param('id') id: string, @Query() query: Record<string, unknown>) {
    return this.responses.inputItems(caller, id, listPage(query, 'desc', 'an item id'));
  }
}
