import type { LoggerService } from '@nestjs/common';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Metrics, requestContext, type RequestContext } from '@atelier/observability';

const CONTEXT = Symbol('atelier.requestContext');
type WithContext = FastifyRequest & { [CONTEXT]?: RequestContext };

/** Probes and scrapes would drown the access log; they are still measured. */
const QUIET_ROUTES = new Set(['/health', '/health/live', '/metrics']);

/**
 * Per request: the request id becomes the async context of everything the request does (so log
 * lines carry it, and jobs it enqueues take it along), its duration is recorded by route pattern
 * and status, and one access-log line is written when the response ends. Measured on the raw
 * response's `close`, so streamed answers (SSE, chat streams) that hijack the reply count too.
 */
export function instrumentHttp(fastify: FastifyInstance, metrics: Metrics, logger?: LoggerService): void {
  fastify.addHook('onRequest', (req: WithContext, reply, done) => {
    const context: RequestContext = { requestId: String(req.id) };
    req[CONTEXT] = context;
    const started = process.hrtime.bigint();
    reply.raw.once('close', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = req.routeOptions?.url ?? 'unmatched';
      // A client that went away before an answer shows as 499 (nginx's convention), not as the default 200.
      const status = reply.raw.writableFinished || reply.raw.headersSent ? reply.raw.statusCode : 499;
      metrics.httpRequestDuration.observe({ method: req.method, route, status_code: String(status) }, seconds);
      if (logger && !QUIET_ROUTES.has(route))
        requestContext.run(context, () =>
          logger.log({ msg: `${req.method} ${req.url.split('?')[0]} ${status} ${Math.round(seconds * 1000)} ms`, method: req.method, route, status, ms: Math.round(seconds * 1000) }, 'HTTP'),
        );
    });
    requestContext.run(context, done);
  });
  // Body parsing resumes on stream events, which run outside the context entered above; entering
  // it again right before the handler keeps the handler (and every await after it) inside.
  fastify.addHook('preHandler', (req: WithContext, _reply, done) => {
    const context = req[CONTEXT];
    if (context) requestContext.run(context, done);
    else done();
  });
}
