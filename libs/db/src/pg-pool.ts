import { Logger } from '@nestjs/common';
import { Pool } from 'pg';

const logger = new Logger('PgPool');

/**
 * A plain node-postgres pool on the same database (and `?schema=`) as Prisma, for the few hot
 * statements where Prisma's per-query overhead (about twice pg's CPU per raw query) matters.
 */
export function createPgPool(databaseUrl: string, max: number, applicationName = 'atelier'): Pool {
  const url = new URL(databaseUrl);
  const schema = url.searchParams.get('schema') ?? undefined;
  url.searchParams.delete('schema');
  const pool = new Pool({
    connectionString: url.toString(),
    max,
    application_name: applicationName,
    ...(schema ? { options: `-c search_path="${schema.replace(/"/g, '')}"` } : {}),
  });
  // An idle client whose server goes away (restart, failover) is emitted here; without a
  // listener Node treats it as an unhandled 'error' and exits. The pool has already dropped the
  // client and opens a new one on the next query.
  pool.on('error', (err) => logger.warn(`idle connection of ${applicationName} lost: ${err.message}`));
  return pool;
}
