import { randomUUID } from 'node:crypto';
import { ConsoleLogger, type INestApplication, type LogLevel, type Type, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import multipart from '@fastify/multipart';
import type { AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';
import { ApiExceptionFilter } from './api-exception.filter';

const LEVELS: LogLevel[] = ['fatal', 'error', 'warn', 'log', 'debug', 'verbose'];

function logLevels(level: AppConfig['LOG_LEVEL']): LogLevel[] | false {
  if (level === 'silent') return false;
  const map: Record<string, LogLevel> = { fatal: 'fatal', error: 'error', warn: 'warn', info: 'log', debug: 'debug', trace: 'verbose' };
  return LEVELS.slice(0, LEVELS.indexOf(map[level]) + 1);
}

/** The Fastify adapter with atelier's HTTP rules: body limit, request ids, envelope for every error. */
export function createFastifyAdapter(config: AppConfig): FastifyAdapter {
  const adapter = new FastifyAdapter({
    bodyLimit: config.BODY_LIMIT_BYTES,
    // A synchronous video request may legitimately wait 10+ minutes for its answer: no socket
    // inactivity timeout and no whole-request timeout (Node's own default would be 5 minutes).
    // RPC_TIMEOUT_MS bounds the wait instead. keepAliveTimeout only covers idle time between requests.
    connectionTimeout: 0,
    requestTimeout: 0,
    keepAliveTimeout: 72_000,
    trustProxy: true,
    genReqId: (req: { headers: Record<string, string | string[] | undefined> }) => {
      const incoming = req.headers['x-request-id'];
      return typeof incoming === 'string' && /^[\w.-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: true },
  });
  const fastify = adapter.getInstance();
  // JSON only (multipart uploads register their own parser); form and text bodies would
  // otherwise reach handlers as look-alike objects or strings.
  for (const type of ['application/x-www-form-urlencoded', 'text/plain']) {
    adapter.useBodyParser(type, false, {}, () => {
      throw new ApiError('unsupported_media_type', `Content-Type ${type} is not supported; send application/json`);
    });
  }
  // multipart/form-data is parsed lazily: handlers stream parts (repository uploads) straight
  // to storage, bounded per file; routes that never read the parts simply see no JSON body.
  void fastify.register(multipart, {
    limits: { fileSize: config.REPO_UPLOAD_MAX_FILE_BYTES, files: config.REPO_UPLOAD_MAX_FILES, fields: 20, fieldSize: 64 * 1024, parts: config.REPO_UPLOAD_MAX_FILES + 20 },
  });
  fastify.addHook('onSend', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });
  return adapter;
}

/** Builds an app without listening, so tests can drive it with Fastify's inject. */
export async function createService(
  module: Type<unknown> | DynamicModule,
  config: AppConfig,
  opts: { service: string },
): Promise<NestFastifyApplication> {
  const logger = new ConsoleLogger(opts.service, {
    json: config.NODE_ENV === 'production' && config.PRETTY_LOGS !== true,
    logLevels: logLevels(config.LOG_LEVEL) || [],
  });
  const app = await NestFactory.create<NestFastifyApplication>(module, createFastifyAdapter(config), {
    logger: config.LOG_LEVEL === 'silent' ? false : logger,
    abortOnError: false,
  });
  app.useGlobalFilters(new ApiExceptionFilter());
  try {
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
  } catch (err) {
    // Providers already hold Redis/Postgres connections; a failed start must not leave them open
    // (the process would never exit, and a test that expects the failure would leak them).
    await app.close().catch(() => undefined);
    throw err;
  }
  app.enableShutdownHooks(['SIGTERM', 'SIGINT']);
  return app;
}

/** Entry point of every app: validated config in, listening service out, clean exit on signals. */
export async function runService(
  module: Type<unknown> | DynamicModule,
  config: AppConfig,
  opts: { service: string; port: number },
): Promise<INestApplication> {
  let app: NestFastifyApplication;
  try {
    app = await createService(module, config, opts);
  } catch (err) {
    process.stderr.write(`${opts.service} failed to start: ${(err as Error).message}\n`);
    process.exit(1);
  }
  await app.listen({ port: opts.port, host: config.HOST });
  new ConsoleLogger(opts.service).log(`listening on http://${config.HOST}:${opts.port}`);
  return app;
}
