import { ConsoleLogger, type LoggerService } from '@nestjs/common';
import pino, { type Logger } from 'pino';
import { requestContext } from './request-context';

export type LogLevelName = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/** The request/job an entry belongs to, for JSON fields and pretty prefixes alike. */
function contextFields(): Record<string, string> {
  const ctx = requestContext.current();
  if (!ctx) return {};
  return { requestId: ctx.requestId, ...(ctx.queue && { queue: ctx.queue }), ...(ctx.jobId && { jobId: ctx.jobId }) };
}

/**
 * Nest's logger interface on pino: one JSON object per line with `level`, `time`, `service`,
 * `context` (the Nest logger name), `msg`, and the requestId/queue/jobId of the work in progress.
 */
export class JsonLogger implements LoggerService {
  readonly pino: Logger;

  constructor(service: string, level: LogLevelName, destination?: pino.DestinationStream) {
    this.pino = pino(
      {
        level,
        base: { service },
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label) => ({ level: label }) },
        mixin: contextFields,
      },
      destination ?? pino.destination({ fd: 1, sync: true }),
    );
  }

  log(message: unknown, ...params: unknown[]): void {
    this.write('info', message, params);
  }
  error(message: unknown, ...params: unknown[]): void {
    this.write('error', message, params);
  }
  warn(message: unknown, ...params: unknown[]): void {
    this.write('warn', message, params);
  }
  debug(message: unknown, ...params: unknown[]): void {
    this.write('debug', message, params);
  }
  verbose(message: unknown, ...params: unknown[]): void {
    this.write('trace', message, params);
  }
  fatal(message: unknown, ...params: unknown[]): void {
    this.write('fatal', message, params);
  }

  /** Nest passes `(message, ...extra, context)`; errors may carry a stack before the context. */
  private write(level: Exclude<LogLevelName, 'silent'>, message: unknown, params: unknown[]): void {
    if (!this.pino.isLevelEnabled(level)) return;
    const rest = [...params];
    const context = rest.length > 0 && typeof rest.at(-1) === 'string' ? (rest.pop() as string) : undefined;
    const fields: Record<string, unknown> = context ? { context } : {};
    if (level === 'error' || level === 'fatal') {
      const stack = rest.find((p) => typeof p === 'string' && p.includes('\n    at '));
      if (stack) fields.stack = stack;
    }
    if (message instanceof Error) this.pino[level]({ ...fields, err: message }, message.message);
    else if (message !== null && typeof message === 'object') this.pino[level]({ ...fields, ...(message as Record<string, unknown>) });
    else this.pino[level](fields, String(message));
  }
}

/** Human-readable logs (development), with the request id of the work in progress after the context. */
export class PrettyLogger extends ConsoleLogger {
  protected override formatContext(context: string): string {
    const ids = contextFields();
    const suffix = ids.requestId ? ` req=${ids.requestId}` : '';
    return super.formatContext(context) + (suffix ? `${suffix.trim()} ` : '');
  }
}
