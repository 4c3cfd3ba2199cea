import { Logger } from '@nestjs/common';
import { Pool } from 'pg';

const logger = new Logger('PgPool');

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
    ...(options ? { options } : {}),
  });
  // An idle client whose server goes away (restart, failover) is emitted here; without a
  // listener Node treats it as an unhandled 'error' and exits. The pool has already dropped the
  // client and opens a new one on the next query.
  pool.on('error', (err) => logger.warn(`idle connection of ${applicationName} lost: ${err.message}`));
  return pool;
}
