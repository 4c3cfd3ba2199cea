import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { secretsEqual } from '@atelier/auth';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { errorEnvelope, QUEUES } from '@atelier/contracts';
import { JobQueues } from '@atelier/runtime';

export const QUEUE_BOARD_PATH = '/admin/queues';

/** The operator token as a bearer header, or as the password of HTTP Basic (so a browser can open the board). */
function presentedToken(header: string | undefined): string | undefined {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (bearer) return bearer[1];
  const basic = /^Basic\s+(\S+)\s*$/i.exec(header ?? '');
  if (!basic) return undefined;
  const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
  return decoded.slice(decoded.indexOf(':') + 1);
}

/**
 * Bull Board at /admin/queues: every queue's jobs (waiting, active, failed, ...), retry and
 * clean, behind the admin token. Absent (404) when ADMIN_TOKEN is unset, like the operator API.
 */
@Injectable()
export class QueueBoard implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly queues: JobQueues,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    const token = this.config.ADMIN_TOKEN;
    if (!token) return;
    const board = new FastifyAdapter();
    createBullBoard({
      // Request/response calls travel on Redis streams, not BullMQ (see RpcStreamConsumer).
      queues: QUEUES.filter((contract) => contract.settings.kind === 'work').map((contract) => new BullMQAdapter(this.queues.queue(contract))),
      serverAdapter: board,
      options: { uiConfig: { boardTitle: 'atelier queues' } },
    });
    board.setBasePath(QUEUE_BOARD_PATH);
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    // Encapsulated: the auth hook guards the board's routes only.
    void fastify.register(async (scope) => {
      scope.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
        const given = presentedToken(req.headers.authorization);
        if (given !== undefined && secretsEqual(given, token)) return;
        await reply
          .status(401)
          .header('www-authenticate', 'Basic realm="atelier queues", charset="UTF-8"')
          .send(errorEnvelope('authentication_required', 'The queue board needs the admin token (Bearer, or as the Basic password)'));
      });
      await scope.register(board.registerPlugin(), { prefix: QUEUE_BOARD_PATH });
    });
  }
}
