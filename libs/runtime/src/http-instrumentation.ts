import type { ServerResponse } from 'node:http';
import type { LoggerService } from '@nestjs/common';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { trace } from '@opentelemetry/api';
import { Metrics, requestContext, SpanKind, SpanStatusCode, tracing, type RequestContext, type Span } from '@atelier/observability';

const CONTEXT = Symbol('atelier.requestContext');
const STARTED = Symbol('atelier.requestStarted');
const REQUEST = Symbol('atelier.request');
const SPAN = Symbol('atelier.span');
type Tracked = FastifyRequest & { [CONTEXT]?: RequestContext; [STARTED]?: number; [SPAN]?: Span };
type TrackedResponse = ServerResponse & { [REQUEST]?: Tracked };

/**
 * The request's server span, continuing the caller's trace (W3C traceparent/tracestate), made
 * the context of everything the request does; its traceparent goes back as a response header,
 * set on the raw response so streamed answers, which write their own head, carry it too.
 */
function startServerSpan(req: Tracked, res: ServerResponse, context: RequestContext): void {
  const parent = tracing.extract(req.headers as Record<string, string | undefined>);
  const route = req.routeOptions?.url ?? 'unmatched';
  const span = tracing.startSpan(
    `${req.method} ${route}`,
    { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method, 'url.path': req.url.split('?')[0], 'http.route': route, 'atelier.request_id': String(req.id) } },
    parent,
  ) as Span;
  req[SPAN] = span;
  context.otel = trace.setSpan(parent, span);
  context.spanHold = { count: 0 };
  const traceparent = tracing.inject(context.otel).traceparent;
  if (traceparent) res.setHeader('traceparent', traceparent);
}

/** Probes and scrapes would drown the access log; they are still measured. */
const QUIET_ROUTES = new Set(['/health', '/health/live', '/metrics']);

/**
 * Per request: the request id becomes the async context of everything the request does (so log
 * lines carry it, and jobs it enqueues take it along), its duration is recorded by route pattern
 * and status, and one access-log line is written when the response ends (`accessLog`: when the
 * logger would print it at all). Measured on the raw response's `close`, so streamed answers
 * (SSE, chat streams) that hijack the reply count too.
 *
 * Every request pays for this, so it allocates little: one listener function shared by all
 * responses (the request hangs on its response, not in a closure and a `once` wrapper per
 * request), a millisecond clock instead of BigInt nanoseconds, and no access line built below
 * info. Together, at LOG_LEVEL=error, an authenticated GET of a model went from 0.050 to 0.046
 * ms of gateway CPU (medians of three alternating runs, 32 connections, 2-core VM); all of this
 * instrumentation had cost 0.011-0.013 ms per request.
 */
export function instrumentHttp(fastify: FastifyInstance, metrics: Metrics, logger?: LoggerService, accessLog = logger !== undefined): void {
  function onClose(this: TrackedResponse): void {
    const req = this[REQUEST];
    if (!req) return;
    this[REQUEST] = undefined;
    const ms = performance.now() - req[STARTED]!;
    const route = req.routeOptions?.url ?? 'unmatched';
    // A client that went away before an answer shows as 499 (nginx's convention), not as the default 200.
    const status = this.writableFinished || this.headersSent ? this.statusCode : 499;
    metrics.httpRequestDuration.observe({ method: req.method, route, status_code: String(status) }, ms / 1000);
    const span = req[SPAN];
    if (span) {
      span.setAttributes({ 'http.route': route, 'http.response.status_code': status });
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      // Work that goes on after the answer (the settle) holds it open: it ends then, at this time.
      tracing.endOrDefer(req[CONTEXT]?.spanHold, span);
    }
    if (logger && accessLog && !QUIET_ROUTES.has(route)) {
      const rounded = Math.round(ms);
      requestContext.run(req[CONTEXT]!, () =>
        logger.log({ msg: `${req.method} ${req.url.split('?')[0]} ${status} ${rounded} ms`, method: req.method, route, status, ms: rounded }, 'HTTP'),
      );
    }
  }
  fastify.addHook('onRequest', (req: Tracked, reply, done) => {
    const context: RequestContext = { requestId: String(req.id) };
    req[CONTEXT] = context;
    req[STARTED] = performance.now();
    const res = reply.raw as TrackedResponse;
    res[REQUEST] = req;
    res.on('close', onClose);
    if (tracing.on) startServerSpan(req, res, context);
    requestContext.run(context, done);
  });
  // Body parsing resumes on stream events, which run outside the context entered above; entering
  // it again right before the handler keeps the handler (and every await after it) inside.
  fastify.addHook('preHandler', (req: Tracked, _reply, done) => {
    const context = req[CONTEXT];
    if (context) requestContext.run(context, done);
    else done();
  });
}
