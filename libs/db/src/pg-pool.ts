import { Logger } from '@nestjs/common';
import { Pool } from 'pg';

const logger = new Logger('PgPool');

/**
 * Connections a pool has opened stay open (a fixed-size pool, HikariCP's default), instead of
 * pg's default of closing each after 10 s idle. Otherwise the first burst after any quiet spell
 * waits for new backends to fork, authenticate and warm their caches while requests queue behind
 * them (bench:chat's first second after idle). TCP keepalive keeps a held connection known to
 * NAT and load balancers in between, which drop silent flows after a few minutes.
 */
export function warmPoolSettings(max: number): { min: number; keepAlive: true; keepAliveInitialDelayMillis: number } {
  return { min: max, keepAlive: true, keepAliveInitialDelayMillis: 60_000 };
}

/**
 * A plain node-postgres pool on the same database (and `?schema=`) as Prisma, for the few hot
 * statements where Prisma's per-query overhead (about twice pg's CPU per raw query) matters.
 */
export function createPgPool(databaseUrl: string, max: number, applicationName = 'atelier', settings: Record<string, string> = {}): Pool {
  const url = new URL(databaseUrl);
  const schema = url.searchParams.get('schema') ?? undefined;
  url.searchParams.delete('schema');
  // Session settings travel in the startup packet, so every connection has them before its first query.
  const options = Object.entries({ ...settings, ...(schema ? { search_path: `"${schema.replace(/"/g, '')}"` } : {}) })
    .map(([name, value]) => `-c ${name}=${value}`)
    .join(' ');
  const pool = new Pool({
    connectionString: url.toString(),
    max,
    application_name: applicationName,
    ...warmPoolSettings(max),
    ...(options ? { options } : {}),
  });
  // An idle client whose server goes away (restart, failover) is emitted here; without a
  // listener Node treats it as an unhandled 'error' and exits. The pool has already dropped the
  // client and opens a new one on the next query.
  pool.on('error', (err) => logger.warn(`idle connection of ${applicationName} lost: ${err.message}`));
  return pool;
}
