import { randomUUID } from 'node:crypto';
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import v8 from 'node:v8';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type INestApplication, type LoggerService, type LogLevel, type Type, type DynamicModule } from '@nestjs/common';
import { ModulesContainer, NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { AppConfig } from '@atelier/config';
import { anthropicError, ANTHROPIC_ROUTE_PREFIX, ApiError } from '@atelier/contracts';
import { JsonLogger, Metrics, PrettyLogger, tracing } from '@atelier/observability';
import { ApiExceptionFilter, toErrorResponse } from './api-exception.filter';
import { instrumentHttp } from './http-instrumentation';
import { parseJsonBody } from './json-body';
import { streamingMultipart } from './streaming-multipart';
import { installProcessFaultPolicy } from './process-fault-policy';
import { metricsAuthorized } from './metrics.controller';

const LEVELS: LogLevel[] = ['fatal', 'error', 'warn', 'log', 'debug', 'verbose'];

function logLevels(level: AppConfig['LOG_LEVEL']): LogLevel[] | false {
  if (level === 'silent') return false;
  const map: Record<string, LogLevel> = { fatal: 'fatal', error: 'error', warn: 'warn', info: 'log', debug: 'debug', trace: 'verbose' };
  return LEVELS.slice(0, LEVELS.indexOf(map[level]) + 1);
}

export interface RegisteredRoute {
  method: string;
  /** Fastify's pattern, e.g. `/api/ai/queue/:id` or `/files/*`. */
  url: string;
}
const routeTables = new WeakMap<object, RegisteredRoute[]>();

/** Every route the app's HTTP server serves (recorded as they are registered), e.g. for API-description coverage. */
export function registeredRoutes(app: NestFastifyApplication): RegisteredRoute[] {
  return [...(routeTables.get(app.getHttpAdapter().getInstance()) ?? [])];
}

/** How much of an oversized body is read and discarded (times the limit), and for how long, before the 413 goes out anyway. */
const OVERSIZED_BODY_DRAIN_FACTOR = 4;
const OVERSIZED_BODY_DRAIN_MS = 30_000;

/**
 * Reads a request body to its end without keeping it. True when it ended within `maxBytes`
 * and `maxMs`; false when it was cut short (the connection should then close).
 */
function discardBody(raw: IncomingMessage, maxBytes: number, maxMs: number): Promise<boolean> {
  if (raw.complete || raw.readableEnded || raw.destroyed) return Promise.resolve(true);
  return new Promise((resolve) => {
    let seen = 0;
    const finish = (ended: boolean) => {
      clearTimeout(timer);
      raw.off('data', onData).off('end', onEnd).off('close', onClose).off('error', onClose);
      if (!ended) raw.pause();
      resolve(ended);
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > maxBytes) finish(false);
    };
    const onEnd = () => finish(true);
    const onClose = () => finish(false);
    const timer = setTimeout(() => finish(false), maxMs);
    raw.on('data', onData).once('end', onEnd).once('close', onClose).once('error', onClose);
    raw.resume();
  });
}

/**
 * Requests Node's HTTP parser refuses before Fastify sees them (a URL or headers over 16 KiB,
 * malformed request lines) get the one error envelope too, not Fastify's own body.
 */
function answerClientError(err: NodeJS.ErrnoException & { rawPacket?: unknown }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const error =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new ApiError('headers_too_large', 'The request line and headers must fit in 16 KiB; send long values in the body')
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new ApiError('request_timeout', 'The request did not arrive in time')
        : ApiError.badRequest('The request is not valid HTTP');
  // The path decides the error's dialect: the request line the parser refused, else the request whose body stopped.
  const packet = Buffer.isBuffer(err.rawPacket) ? err.rawPacket.subarray(0, 256).toString('latin1') : '';
  const url = /^[A-Z]+ (\S+)/.exec(packet)?.[1] ?? requestUrls.get(socket);
  answerOnSocket(socket, error, url);
}

/** The URL of the request each socket is reading now (set when its headers arrive). */
const requestUrls = new WeakMap<Duplex, string>();

/**
 * An error in the envelope (under /api/anthropic/, Anthropic's), written straight to a socket no
 * response object stands for (or that answered nothing yet), then the close.
 */
function answerOnSocket(socket: Duplex, error: ApiError, url?: string): void {
  let status = error.status;
  let extra = '';
  let body = JSON.stringify(error.toEnvelope());
  if (url?.startsWith(ANTHROPIC_ROUTE_PREFIX)) {
    const requestId = randomUUID();
    const anthropic = anthropicError(error.status, error.toEnvelope(), requestId);
    status = anthropic.status;
    body = JSON.stringify(anthropic.body);
    extra = `request-id: ${requestId}\r\n`;
  }
  if (socket.writable)
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  socket.destroy();
}

/**
 * At most `max` connections at once that have not yet delivered a whole request: new ones, and
 * ones whose request's body is still arriving. Past it a new connection is closed at once,
 * before it costs a parser or a buffer. Such connections come before any authentication, so
 * without a cap a client trickling bytes on thousands of sockets holds them all, each until
 * HTTP_HEADERS_TIMEOUT_MS or HTTP_REQUEST_TIMEOUT_MS ends it. Idle keep-alive connections between
 * requests do not count: HTTP_KEEP_ALIVE_TIMEOUT_MS bounds them, and the headers timeout any
 * request that then trickles in.
 */
function capIncompleteRequests(server: Server, max: number, bodyIdleMs: number): void {
  const incomplete = new Set<Socket>();
  const done = (socket: Socket) => incomplete.delete(socket);
  server.on('connection', (socket: Socket) => {
    if (incomplete.size >= max) {
      socket.destroy();
      return;
    }
    incomplete.add(socket);
    socket.once('close', () => done(socket));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as Socket;
    if (req.url) requestUrls.set(socket, req.url);
    // 'request' comes with the headers, before the parser has marked even a body-less message
    // complete, and 'end' only comes to a body someone reads: an event stream's request never is.
    // A request without a body is whole with its headers; one with a body, when the body was read
    // or the answer went out without it.
    if (req.complete || (req.headers['transfer-encoding'] === undefined && (req.headers['content-length'] ?? '0') === '0')) {
      done(socket);
      return;
    }
    incomplete.add(socket);
    // A body that stops arriving is cut off after HTTP_BODY_IDLE_TIMEOUT_MS without a byte (as
    // nginx's client_body_timeout), while a slow upload that keeps sending goes on to
    // HTTP_REQUEST_TIMEOUT_MS. The socket's timer counts any traffic, reads included.
    const idle = () => {
      if (res.headersSent) socket.destroy();
      else answerOnSocket(socket, new ApiError('request_timeout', `The request body stopped arriving: nothing for ${bodyIdleMs} ms (HTTP_BODY_IDLE_TIMEOUT_MS)`), req.url);
    };
    // Node's own socket timeout handler asks the incomplete request first (and destroys the socket
    // when nobody answers): listening on the request lets the 408 go out before the close.
    socket.setTimeout(bodyIdleMs);
    req.once('timeout', idle);
    const whole = () => {
      req.off('timeout', idle);
      // Only our timer: after an answer Node may already have set the keep-alive one.
      if (socket.timeout === bodyIdleMs) socket.setTimeout(0);
      done(socket);
    };
    req.once('end', whole);
    res.once('finish', whole);
  });
}

/** The Fastify adapter with atelier's HTTP rules: body limit, request ids, envelope for every error. */
export function createFastifyAdapter(config: AppConfig): FastifyAdapter {
  const adapter = new FastifyAdapter({
    bodyLimit: config.BODY_LIMIT_BYTES,
    // A synchronous video request may legitimately wait 10+ minutes for its answer: no socket
    // inactivity timeout (RPC_TIMEOUT_MS bounds the wait instead). Node's headers and request
    // timeouts only run while the request itself is arriving, so they bound a client that
    // trickles its headers or body (slowloris) without touching a long wait for the answer.
    connectionTimeout: 0,
    requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
    keepAliveTimeout: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    // Node checks those timeouts every connectionsCheckingInterval (30 s by default, which would
    // let a 10 s timeout run 40 s).
    http: { headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS, requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS, connectionsCheckingInterval: 1000 },
    // X-Forwarded-* are anyone's to send: believed only from the proxies TRUST_PROXY names.
    // (A hop count is Fastify's too; the adapter's type leaves numbers out.)
    trustProxy: config.TRUST_PROXY as boolean | string[],
    genReqId: (req: { headers: Record<string, string | string[] | undefined> }) => {
      const incoming = req.headers['x-request-id'];
      return typeof incoming === 'string' && /^[\w.-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: true },
    clientErrorHandler: answerClientError,
    // Errors Fastify raises before routing (a URL whose percent-encoding is not UTF-8, a bad
    // content-type header) otherwise answer in Fastify's own body, not the envelope.
    frameworkErrors: (error: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
      const plain = toErrorResponse(error);
      // Raised before the onRequest hooks (which set the ids on every other answer) and answered
      // past the onSend hook: under /api/anthropic/ the dialect is applied here (a 414 for a
      // path segment past the router's limit, say).
      const anthropic = req.url.startsWith(ANTHROPIC_ROUTE_PREFIX) ? anthropicError(plain.status, plain.body, req.id) : undefined;
      if (anthropic) reply.header('request-id', req.id);
      const { status, body } = anthropic ?? plain;
      void reply.code(status).header('content-type', 'application/json; charset=utf-8').header('x-request-id', req.id).send(body);
    },
  });
  const fastify = adapter.getInstance();
  capIncompleteRequests(fastify.server, config.HTTP_MAX_INCOMPLETE_REQUESTS, config.HTTP_BODY_IDLE_TIMEOUT_MS);
  const routes: RegisteredRoute[] = [];
  routeTables.set(fastify, routes);
  fastify.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });
  // JSON only (multipart uploads register their own parser); form and text bodies would
  // otherwise reach handlers as look-alike objects or strings.
  for (const type of ['application/x-www-form-urlencoded', 'text/plain']) {
    adapter.useBodyParser(type, false, {}, () => {
      throw new ApiError('unsupported_media_type', `Content-Type ${type} is not supported; send application/json`);
    });
  }
  // Our own JSON parser: nesting depth and prototype keys are refused with a 400 that says so,
  // before any validator recurses over the body (async: Nest completes sync parsers only via done).
  adapter.useBodyParser('application/json', false, { bodyLimit: config.BODY_LIMIT_BYTES }, async (_req: unknown, body: Buffer) => parseJsonBody(body));
  // Raw uploads (a trainer's checkpoint files) reach the handler as the request stream, which
  // bounds and stores it; nothing is buffered here.
  fastify.addContentTypeParser('application/octet-stream', (_req, payload, done) => done(null, payload));
  // multipart/form-data is parsed lazily: handlers stream parts (repository uploads) straight
  // to storage, bounded per file; routes that never read the parts simply see no JSON body.
  void fastify.register(streamingMultipart, {
    limits: { fileSize: config.REPO_UPLOAD_MAX_FILE_BYTES, files: config.REPO_UPLOAD_MAX_FILES, fields: 20, fieldSize: 64 * 1024, parts: config.REPO_UPLOAD_MAX_FILES + 20 },
  });
  // Set when the request arrives (a synchronous hook), so every answer carries it, errors and
  // replays included, without an async onSend hook on each request.
  fastify.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    if (req.url.startsWith(ANTHROPIC_ROUTE_PREFIX)) reply.header('request-id', req.id);
    done();
  });
  // Anthropic's routes answer errors in its envelope, whichever layer refused (the body parser,
  // the auth guard, a rate limit, the route itself or an unknown path): one rewrite at the end.
  // Synchronous, and a status check for every other answer.
  fastify.addHook('onSend', (req, reply, payload, done) => {
    if (reply.statusCode < 400 || typeof payload !== 'string' || !req.url.startsWith(ANTHROPIC_ROUTE_PREFIX)) return done(null, payload);
    let envelope: { error?: { message?: unknown } } | undefined;
    try {
      envelope = JSON.parse(payload) as typeof envelope;
    } catch {
      return done(null, payload);
    }
    if (typeof envelope?.error?.message !== 'string') return done(null, payload);
    const { status, body } = anthropicError(reply.statusCode, envelope as { error: { message: string } }, req.id);
    void reply.code(status);
    done(null, JSON.stringify(body));
  });
  // Fastify refuses an oversized body before reading it. Answering while the client is still
  // uploading makes fetch/undici (and so the OpenAI SDK) fail with EPIPE instead of showing the
  // 413: read and discard the rest first, up to a bound, so every client can read the answer.
  fastify.addHook('onError', async (req, reply, error) => {
    if ((error as { code?: string }).code !== 'FST_ERR_CTP_BODY_TOO_LARGE') return;
    const drained = await discardBody(req.raw, OVERSIZED_BODY_DRAIN_FACTOR * config.BODY_LIMIT_BYTES, OVERSIZED_BODY_DRAIN_MS);
    // Fastify closes the connection after any body error, in case more data follows; a body
    // read to its end leaves nothing behind, so the connection may serve the next request.
    if (drained) reply.removeHeader('connection');
    else void reply.header('connection', 'close');
  });
  return adapter;
}

/** JSON lines in production (or PRETTY_LOGS=false), readable lines otherwise (or PRETTY_LOGS=true). */
export function createLogger(config: AppConfig, service: string): LoggerService | false {
  if (config.LOG_LEVEL === 'silent') return false;
  const json = config.PRETTY_LOGS === undefined ? config.NODE_ENV === 'production' : !config.PRETTY_LOGS;
  if (json) return new JsonLogger(service, config.LOG_LEVEL);
  return new PrettyLogger(service, { logLevels: logLevels(config.LOG_LEVEL) || [] });
}

/**
 * A module that needs Fastify hooks on every route (Idempotency-Key) provides this token; they must be
 * added before Nest registers the routes, so createService installs them. One provider per app.
 */
export const HTTP_HOOKS = Symbol('atelier.httpHooks');
export interface HttpHooks {
  install(fastify: FastifyInstance): void;
}

/** The app's HTTP_HOOKS provider, if a module has one (app.get would log an error for a missing one). */
function optionalHttpHooks(app: NestFastifyApplication): HttpHooks | undefined {
  for (const module of app.get(ModulesContainer).values()) {
    const instance = module.providers.get(HTTP_HOOKS)?.instance as HttpHooks | undefined;
    if (instance) return instance;
  }
  return undefined;
}

/** The services' version, as their traces' resource says (service.version). */
const SERVICE_VERSION = '0.1.0';

/** Builds an app without listening, so tests can drive it with Fastify's inject. */
export async function createService(
  module: Type<unknown> | DynamicModule,
  config: AppConfig,
  opts: { service: string },
): Promise<NestFastifyApplication> {
  const logger = createLogger(config, opts.service);
  const app = await NestFactory.create<NestFastifyApplication>(module, createFastifyAdapter(config), {
    logger,
    abortOnError: false,
  });
  app.useGlobalFilters(new ApiExceptionFilter());
  // Before init: the hooks must be in place when Nest registers the routes.
  // The access line is an info entry: below that level nothing of it is built.
  instrumentHttp(app.getHttpAdapter().getInstance(), app.get(Metrics), logger || undefined, (logLevels(config.LOG_LEVEL) || []).includes('log'));
  optionalHttpHooks(app)?.install(app.getHttpAdapter().getInstance());
  try {
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
  } catch (err) {
    // Providers already hold Redis/Postgres connections; a failed start must not leave them open
    // (the process would never exit, and a test that expects the failure would leak them).
    await app.close().catch(() => undefined);
    throw err;
  }
  return app;
}

/**
 * Graceful stop, in the order that loses no work:
 * 1. the HTTP server stops accepting connections; idle keep-alive connections are closed, requests
 *    arriving on busy ones get 503 + `Connection: close`, and requests in flight (a sync render, a
 *    chat completion) finish while Postgres, Redis and the reply channels are all still open.
 *    Event streams are ended by their hub's preClose hook, so they do not hold the close up.
 *    After `drainMs` the remaining connections are cut.
 * 2. Nest's shutdown: workers stop taking jobs and finish or hand back the active ones
 *    (WorkerHost), then Postgres and Redis close.
 * Nest's own signal handling would run step 2 first and close the database under the requests.
 */
export async function drainAndClose(app: NestFastifyApplication, drainMs: number): Promise<void> {
  const fastify = app.getHttpAdapter().getInstance();
  const server = fastify.server;
  const cut = setTimeout(() => server.closeAllConnections(), drainMs);
  cut.unref();
  try {
    await fastify.close();
  } finally {
    clearTimeout(cut);
  }
  await app.close();
}

/**
 * Sets V8_HEAP_GROWING_PERCENT for this process; called before the app is built, since V8 reads
 * the factor at each full collection, start-up's included. Benchmarks call it as the services do.
 */
export function applyHeapGrowth(config: AppConfig): void {
  if (config.V8_HEAP_GROWING_PERCENT > 0) v8.setFlagsFromString(`--heap-growing-percent=${config.V8_HEAP_GROWING_PERCENT}`);
}

/** Entry point of every app: validated config in, listening service out, clean exit on signals. */
export async function runService(
  module: Type<unknown> | DynamicModule,
  config: AppConfig,
  opts: { service: string; port: number },
): Promise<INestApplication> {
  applyHeapGrowth(config);
  // Before the app is built: spans of its start-up work (none yet) and of every request after.
  tracing.start(config, opts.service, SERVICE_VERSION);
  let app: NestFastifyApplication;
  try {
    app = await createService(module, config, opts);
  } catch (err) {
    process.stderr.write(`${opts.service} failed to start: ${(err as Error).message}\n`);
    process.exit(1);
  }
  const logger = createLogger(config, opts.service);
  installProcessFaultPolicy(opts.service, logger, app.get(Metrics));
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    if (logger) logger.log(`${signal}: draining requests and jobs`, 'Shutdown');
    // Bounded: the drain, then the workers' own SHUTDOWN_TIMEOUT_MS, then a margin.
    const deadline = setTimeout(() => {
      process.stderr.write(`${opts.service} did not stop in time; exiting\n`);
      process.exit(1);
    }, 2 * config.SHUTDOWN_TIMEOUT_MS + 10_000);
    deadline.unref();
    drainAndClose(app, config.SHUTDOWN_TIMEOUT_MS)
      .then(() => tracing.stop())
      .then(
      () => {
        if (logger) logger.log('stopped', 'Shutdown');
        process.exit(0);
      },
      (err: Error) => {
        process.stderr.write(`${opts.service} failed to stop cleanly: ${err.stack ?? err.message}\n`);
        process.exit(1);
      },
    );
  };
  // `on`, not `once`: a second signal (Ctrl-C pressed twice, a process manager repeating it)
  // must not kill the process halfway through its drain.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  await app.listen({ port: opts.port, host: config.HOST });
  if (logger) logger.log(`listening on http://${config.HOST}:${opts.port}`, 'Bootstrap');
  if (config.METRICS_PORT !== undefined) {
    const metricsServer = await serveMetrics(app.get(Metrics), config, config.METRICS_PORT);
    app.getHttpServer().once('close', () => metricsServer.close());
    if (logger) logger.log(`metrics on http://${config.HOST}:${config.METRICS_PORT}/metrics`, 'Bootstrap');
  }
  return app;
}

/**
 * GET /metrics on a port of its own (METRICS_PORT), which the manifests give Prometheus and no
 * Service: the public port then has no /metrics, so namespace labels never leave the cluster.
 */
export async function serveMetrics(metrics: Metrics, config: AppConfig, port: number): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(new ApiError('route_not_found', 'Only GET /metrics is served here').toEnvelope()));
      return;
    }
    if (!metricsAuthorized(config, req.headers.authorization)) {
      res.writeHead(401, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(ApiError.unauthorized('Metrics need "Authorization: Bearer <METRICS_TOKEN>"').toEnvelope()));
      return;
    }
    metrics.scrape().then(
      ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' }).end(body),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, config.HOST, () => resolve());
  });
  server.unref();
  return server;
}
