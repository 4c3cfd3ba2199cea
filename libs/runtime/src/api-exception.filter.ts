import { Catch, HttpException, Logger, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ApiError, errorEnvelope, type ErrorEnvelope, type ErrorType } from '@atelier/contracts';
import { tracing } from '@atelier/observability';
import { backingServiceFault, errorSummary, outageError, OUTAGE_RETRY_AFTER_SECONDS, type BackingService } from './backing-service-fault';

const TYPE_BY_STATUS: Record<number, ErrorType> = {
  400: 'invalid_request',
  401: 'authentication_required',
  402: 'insufficient_credits',
  403: 'permission_denied',
  404: 'route_not_found',
  405: 'method_not_allowed',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  422: 'unprocessable_entity',
  429: 'rate_limited',
  502: 'upstream_error',
  503: 'service_unavailable',
  504: 'timeout',
};

const logger = new Logger('HttpErrors');

/** During an outage every request fails the same way; one line per service every few seconds says enough. */
const OUTAGE_LOG_INTERVAL_MS = 5_000;
const lastOutageLog = new Map<BackingService, number>();
function logOutage(service: BackingService, err: unknown): void {
  const now = Date.now();
  if (now - (lastOutageLog.get(service) ?? 0) < OUTAGE_LOG_INTERVAL_MS) return;
  lastOutageLog.set(service, now);
  logger.warn(`${service} unavailable; answering 503 (${errorSummary(err)})`);
}

/** Turns any thrown value into the one error envelope with a fitting status; only real bugs are 500. */
export function toErrorResponse(err: unknown): { status: number; body: ErrorEnvelope } {
  if (err instanceof ApiError) return { status: err.status, body: err.toEnvelope() };
  if (err instanceof HttpException) {
    const status = err.getStatus();
    const response = err.getResponse();
    const message =
      typeof response === 'string'
        ? response
        : Array.isArray((response as { message?: unknown }).message)
          ? ((response as { message: string[] }).message).join('; ')
          : String((response as { message?: unknown }).message ?? err.message);
    return { status, body: errorEnvelope(TYPE_BY_STATUS[status] ?? (status >= 500 ? 'internal_error' : 'invalid_request'), message) };
  }
  if (isNulRejection(err))
    return { status: 400, body: errorEnvelope('invalid_request', 'Text must not contain NUL characters (\\u0000), in the body or in the path') };
  // Every connection busy is overload, not a crash: the client is told to come back shortly.
  if (isPoolExhausted(err))
    return { status: 503, body: errorEnvelope('service_unavailable', 'The database is at capacity (every connection is busy); retry in a moment') };
  const outage = backingServiceFault(err);
  if (outage) {
    logOutage(outage, err);
    const unavailable = outageError(outage);
    return { status: unavailable.status, body: unavailable.toEnvelope() };
  }
  const fastifyErr = err as { statusCode?: number; code?: string; message?: string };
  if (typeof fastifyErr.statusCode === 'number' && fastifyErr.statusCode >= 400 && fastifyErr.statusCode < 500) {
    const status = fastifyErr.statusCode;
    return { status, body: errorEnvelope(TYPE_BY_STATUS[status] ?? 'invalid_request', fastifyErr.message ?? 'Bad request') };
  }
  logger.error((err as Error)?.stack ?? String(err));
  return { status: 500, body: errorEnvelope('internal_error', 'An unexpected error occurred') };
}

/** Prisma could not get a connection for a transaction within its maxWait (P2028), however deep it is wrapped. */
function isPoolExhausted(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown };
  if (e.code === 'P2028' || (typeof e.message === 'string' && /Unable to start a transaction in the given time/.test(e.message))) return true;
  return isPoolExhausted(e.cause, depth + 1);
}

/**
 * Postgres stores no NUL character in text or JSON (SQLSTATE 22021 / 22P05); a caller's string
 * that contains one reaches it as a query parameter, so its refusal is the request's fault.
 */
function isNulRejection(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  const text = typeof e?.message === 'string' ? e.message : '';
  return (
    e?.code === '22021' ||
    e?.code === '22P05' ||
    /invalid byte sequence for encoding "UTF8": 0x00|unsupported Unicode escape sequence|Code: `(22021|22P05)`/.test(text)
  );
}

@Catch()
export class ApiExceptionFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    if (host.getType() !== 'http') throw exception;
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    if (reply.sent) return;
    const { status, body } = toErrorResponse(exception);
    // The request's span records which envelope it answered; a 5xx also fails it (a 4xx is the caller's).
    if (status >= 500) tracing.fail(body.error.type, body.error.message);
    else tracing.annotate({ 'error.type': body.error.type });
    // Every 503 is temporary (an outage, a draining replica): tell clients when to come back.
    if (status === 503) void reply.header('retry-after', String(OUTAGE_RETRY_AFTER_SECONDS));
    // A 429 that did not say when (max_concurrent: when some work ends) is worth retrying in a second.
    if (status === 429 && !reply.hasHeader('retry-after')) void reply.header('retry-after', '1');
    void reply.status(status).header('content-type', 'application/json; charset=utf-8').send(body);
  }
}
