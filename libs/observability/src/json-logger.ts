import { ConsoleLogger, type LoggerService, type LogLevel } from '@nestjs/common';
import pino, { type Logger } from 'pino';
import { requestContext } from './request-context';
import { tracing } from './tracing';

export type LogLevelName = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/** The request/job an entry belongs to, for JSON fields and pretty prefixes alike. */
function contextFields(): Record<string, string> {
  const ctx = requestContext.current();
  if (!ctx) return {};
  return { requestId: ctx.requestId, ...(ctx.queue && { queue: ctx.queue }), ...(ctx.jobId && { jobId: ctx.jobId }), ...tracing.ids() };
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

const NEST_BOOT_CONTEXTS = new Set(['InstanceLoader', 'RoutesResolver', 'RouterExplorer', 'NestFactory', 'NestApplication']);

/**
 * Human-readable logs (development), with the request id of the work in progress after the
 * context. A structured entry (an object with `msg`, such as the access line of every request)
 * is one line: `msg`, plus its fields (`key=value ...`) at debug. Nest would print it as an
 * indented object over eight lines.
 */
export class PrettyLogger extends ConsoleLogger {
  /**
   * Nest's own start-up lines (a line per module and per route, some 60 per app) bury the
   * banner; they are shown at debug.
   */
  override log(message: unknown, ...rest: unknown[]): void {
    const context = rest.at(-1);
    if (typeof context === 'string' && NEST_BOOT_CONTEXTS.has(context) && !this.isLevelEnabled('debug')) return;
    super.log(message, ...(rest as [string?]));
  }

  protected override stringifyMessage(message: unknown, logLevel: LogLevel): string {
    if (message !== null && typeof message === 'object' && !Array.isArray(message) && !(message instanceof Error) && 'msg' in message) {
      const { msg, ...rest } = message as Record<string, unknown>;
      // The fields are for machines (JSON logs keep them); a person reads them at debug.
      if (!this.isLevelEnabled('debug')) return super.stringifyMessage(String(msg), logLevel);
      const fields = Object.entries(rest)
        .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
        .join(' ');
      return super.stringifyMessage(fields ? `${String(msg)} ${fields}` : String(msg), logLevel);
    }
    return super.stringifyMessage(message, logLevel);
  }

  protected override formatContext(context: string): string {
    const ids = contextFields();
    const suffix = ids.requestId ? ` req=${ids.requestId}` : '';
    return super.formatContext(context) + (suffix ? `${suffix.trim()} ` : '');
  }
}
