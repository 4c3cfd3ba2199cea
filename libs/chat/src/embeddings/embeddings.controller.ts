import { Body, Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CountsAsWork, CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { IDEMPOTENT } from '@atelier/idempotency';
import { abortWhenGone } from '@atelier/runtime';
import { EmbeddingsService } from './embeddings.service';

/** POST /api/ai/embeddings, OpenAI-compatible; the work is EmbeddingsService's. */
@Controller('api/ai/embeddings')
@RequiresScope('chat')
export class EmbeddingsController {
  constructor(private readonly embeddings: EmbeddingsService) {}

  @Post()
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  async create(@CurrentCaller() caller: Caller, @Body() body: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const gone = abortWhenGone(req, reply);
    try {
      await this.embeddings.create(caller, body, req.id, {
        signal: gone.signal,
        header: (name, value) => void reply.header(name, value),
        send: async (answer) => {
          await reply.status(200).header('content-type', 'application/json; charset=utf-8').send(answer);
        },
      });
    } finally {
      gone.release();
    }
  }
}
