import type { LoggerService } from '@nestjs/common';
import type { Metrics } from '@atelier/observability';
import { backingServiceFault } from './backing-service-fault';

/**
 * What a process does with an error nobody caught, decided once for every app:
 * - a backing-service fault (a Postgres or Redis connection dropped, emitted by a client that
 *   somehow had no 'error' listener): logged and counted, the process lives on. The client has
 *   already discarded the connection and the next use reconnects; nothing in memory is half done.
 * - an unhandled promise rejection: logged with its stack and counted, the process lives on.
 *   The operation that created the promise has already moved on without it, so nothing waits
 *   on a state the rejection left behind; killing every request in flight would do more harm.
 * - any other uncaught exception: logged and counted, then the process exits (code 70). A
 *   synchronous throw that unwound to the event loop may have stopped halfway through changing
 *   in-memory state (a map of pending calls, a connection's bookkeeping); that state is unknown,
 *   so the supervisor (Kubernetes, `npm start`) starts a clean process. Durable state is safe:
 *   reservations, generations and events are recovered by the sweepers.
 */
export function installProcessFaultPolicy(service: string, logger: LoggerService | false, metrics: Metrics): void {
  const log = (level: 'warn' | 'error' | 'fatal', message: string) => {
    if (logger) (logger[level] ?? logger.error).call(logger, message, 'ProcessFaults');
    else process.stderr.write(`${service}: ${message}\n`);
  };
  const describe = (err: unknown) => (err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.on('unhandledRejection', (reason) => {
    const outage = backingServiceFault(reason);
    metrics.processFaults.inc({ kind: outage ? 'backing_service' : 'unhandled_rejection' });
    if (outage) log('warn', `${outage} unavailable (unawaited operation): ${(reason as Error)?.message ?? reason}`);
    else log('error', `Unhandled promise rejection (process continues): ${describe(reason)}`);
  });
  process.on('uncaughtException', (err, origin) => {
    const outage = backingServiceFault(err);
    if (outage) {
      metrics.processFaults.inc({ kind: 'backing_service' });
      log('warn', `${outage} connection error nobody handled (process continues): ${err.message}`);
      return;
    }
    metrics.processFaults.inc({ kind: 'uncaught_exception' });
    log('fatal', `Uncaught exception (${origin}); exiting because in-memory state is unknown: ${describe(err)}`);
    process.exitCode = 70;
    // Let the log line reach its destination before the process goes.
    setImmediate(() => process.exit(70));
  });
}
