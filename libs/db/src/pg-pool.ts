import { Pool } from 'pg';

/**
 * A plain node-postgres pool on the same database (and `?schema=`) as Prisma, for the few hot
 * statements where Prisma's per-query overhead (about twice pg's CPU per raw query) matters.
 */
export function createPgPool(databaseUrl: string, max: number, applicationName = 'atelier'): Pool {
  const url = new URL(databaseUrl);
  const schema = url.searchParams.get('schema') ?? undefined;
  url.searchParams.delete('schema');
  return new Pool({
    connectionString: url.toString(),
    max,
    application_name: applicationName,
    ...(schema ? { options: `-c search_path="${schema.replace(/"/g, '')}"` } : {}),
  });
}
