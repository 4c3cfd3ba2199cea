// Integration test of tools/db/migrations.mjs (the offline `prisma migrate deploy`) against a real
// PostgreSQL server: TEST_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/postgres) must
// point at a server where the user may CREATE DATABASE. Each run uses its own throwaway databases.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { Client } from 'pg';

const execFileAsync = promisify(execFile);

const REPO_ROOT = path.resolve(__dirname, '../..');
const MIGRATIONS_DIR = path.join(REPO_ROOT, 'prisma', 'migrations');
const CLI = path.join(__dirname, 'migrate.mjs');
const SERVER_URL = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

type DeployResult = { applied: string[] };
type MigrationsModule = {
  deploy(options: { databaseUrl: string; migrationsDir?: string; log?: (line: string) => void }): Promise<DeployResult>;
  status(options: { databaseUrl: string; migrationsDir?: string; log?: (line: string) => void }): Promise<{
    applied: string[];
    pending: string[];
    edited: string[];
  }>;
  verify(options: { databaseUrl: string; log?: (line: string) => void }): Promise<{ ok: boolean; driftSql: string | null }>;
  MigrationError: new (...args: unknown[]) => Error & { code: string };
};

/** prisma/migrations/<name>/migration.sql folders, sorted, with the checksum Prisma records. */
const folders = readdirSync(MIGRATIONS_DIR, { withFileTypes: true })
  .filter((e) => e.isDirectory() && existsSync(path.join(MIGRATIONS_DIR, e.name, 'migration.sql')))
  .map((e) => e.name)
  .sort()
  .map((name) => ({
    name,
    checksum: createHash('sha256')
      .update(readFileSync(path.join(MIGRATIONS_DIR, name, 'migration.sql')))
      .digest('hex'),
  }));

function urlFor(database: string, params = ''): string {
  const u = new URL(SERVER_URL);
  u.pathname = `/${database}`;
  u.search = params;
  return u.href;
}

async function withClient<T>(url: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

const quiet = () => undefined;

describe('tools/db/migrations.mjs deploy (offline prisma migrate deploy)', () => {
  const suffix = randomBytes(5).toString('hex');
  const dbMain = `atelier_mig_${suffix}`;
  const dbConcurrent = `atelier_mig_${suffix}_conc`;
  const dbSchema = `atelier_mig_${suffix}_schema`;
  const dbLocked = `atelier_mig_${suffix}_lock`;
  let m: MigrationsModule;

  beforeAll(async () => {
    m = (await import(pathToFileURL(path.join(__dirname, 'migrations.mjs')).href)) as MigrationsModule;
    expect(folders.length).toBeGreaterThan(0);
  });

  afterAll(async () => {
    await withClient(SERVER_URL, async (c) => {
      for (const db of [dbMain, dbConcurrent, dbSchema, dbLocked]) {
        await c.query(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`);
      }
    });
  });

  it('creates the database and applies every migration on first deploy', async () => {
    const lines: string[] = [];
    const result = await m.deploy({ databaseUrl: urlFor(dbMain), log: (l) => lines.push(l) });

    expect(result.applied).toEqual(folders.map((f) => f.name));
    expect(lines.join('\n')).toMatch(new RegExp(`${folders.length} migrations? applied`));
    const tables = await withClient(urlFor(dbMain), async (c) =>
      (await c.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)).rows.map((r) => r.tablename),
    );
    expect(tables).toEqual(expect.arrayContaining(['namespaces', 'generations', 'api_keys', '_prisma_migrations']));
  });

  it('applies nothing on a second deploy', async () => {
    const lines: string[] = [];
    const result = await m.deploy({ databaseUrl: urlFor(dbMain), log: (l) => lines.push(l) });
    expect(result.applied).toEqual([]);
    expect(lines.join('\n')).toMatch(/Database is up to date/);
    const s = await m.status({ databaseUrl: urlFor(dbMain), log: quiet });
    expect(s.pending).toEqual([]);
    expect(s.applied).toEqual(folders.map((f) => f.name));
  });

  it('records migrations in _prisma_migrations like Prisma (checksum = sha256 of migration.sql)', async () => {
    const rows = await withClient(urlFor(dbMain), async (c) =>
      (
        await c.query(
          `SELECT id, migration_name, checksum, finished_at, rolled_back_at, logs, applied_steps_count
             FROM _prisma_migrations ORDER BY migration_name`,
        )
      ).rows,
    );
    expect(rows.map((r) => ({ name: r.migration_name, checksum: r.checksum }))).toEqual(folders);
    for (const r of rows) {
      expect(r.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.finished_at).toBeInstanceOf(Date);
      expect(r.rolled_back_at).toBeNull();
      expect(r.applied_steps_count).toBe(1);
    }
    // Same column types as the table Prisma's schema engine creates.
    const columns = await withClient(urlFor(dbMain), async (c) =>
      (
        await c.query(
          `SELECT column_name, data_type, character_maximum_length, is_nullable
             FROM information_schema.columns WHERE table_name = '_prisma_migrations' ORDER BY ordinal_position`,
        )
      ).rows.map((r) => `${r.column_name} ${r.data_type}${r.character_maximum_length ? `(${r.character_maximum_length})` : ''} ${r.is_nullable === 'NO' ? 'NOT NULL' : 'NULL'}`),
    );
    expect(columns).toEqual([
      'id character varying(36) NOT NULL',
      'checksum character varying(64) NOT NULL',
      'finished_at timestamp with time zone NULL',
      'migration_name character varying(255) NOT NULL',
      'logs text NULL',
      'rolled_back_at timestamp with time zone NULL',
      'started_at timestamp with time zone NOT NULL',
      'applied_steps_count integer NOT NULL',
    ]);
  });

  it("is accepted by Prisma's own schema engine (history in sync, no drift from schema.prisma)", async () => {
    const v = await m.verify({ databaseUrl: urlFor(dbMain), log: quiet });
    expect(v.driftSql).toBeNull();
    expect(v.ok).toBe(true);
  });

  it('applies each migration exactly once when deploys run concurrently (separate processes)', async () => {
    const env = { ...process.env, DATABASE_URL: urlFor(dbConcurrent) };
    const runs = await Promise.all(
      [1, 2, 3].map(() => execFileAsync(process.execPath, [CLI, 'deploy'], { env, cwd: REPO_ROOT })),
    );
    const appliedLines = runs.flatMap((r) => r.stdout.split('\n').filter((l) => l.startsWith('Applied migration ')));
    expect(appliedLines.sort()).toEqual(folders.map((f) => `Applied migration ${f.name}`));

    const counts = await withClient(urlFor(dbConcurrent), async (c) =>
      (await c.query(`SELECT migration_name, count(*)::int AS n FROM _prisma_migrations GROUP BY 1 ORDER BY 1`)).rows,
    );
    expect(counts).toEqual(folders.map((f) => ({ migration_name: f.name, n: 1 })));
  }, 60_000);

  it('serializes deploys on the advisory lock: waiters apply nothing twice once the holder releases it', async () => {
    await withClient(SERVER_URL, (c) => c.query(`CREATE DATABASE "${dbLocked}"`));
    const holder = new Client({ connectionString: urlFor(dbLocked) });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock(72707369)');
      const logs: string[][] = [[], []];
      const deploys = logs.map((lines) => m.deploy({ databaseUrl: urlFor(dbLocked), log: (l) => lines.push(l) }));
      // Both deploys are now blocked on the lock Prisma uses.
      for (let i = 0; i < 200; i++) {
        const { rows } = await holder.query(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = 72707369 AND NOT granted`,
        );
        if (rows[0].n === 2) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(logs.every((lines) => lines.some((l) => l.startsWith('Waiting for another migration run')))).toBe(true);
      expect(await holder.query(`SELECT to_regclass('_prisma_migrations') AS t`).then((r) => r.rows[0].t)).toBeNull();
      await holder.query('SELECT pg_advisory_unlock(72707369)');
      const results = await Promise.all(deploys);
      expect(results.flatMap((r) => r.applied).sort()).toEqual(folders.map((f) => f.name));
      expect(results.map((r) => r.applied.length).sort()).toEqual([0, folders.length]);
    } finally {
      await holder.end();
    }
  }, 60_000);

  it('refuses to deploy when an applied migration was edited (checksum mismatch)', async () => {
    const target = folders[0];
    await withClient(urlFor(dbMain), (c) =>
      c.query(`UPDATE _prisma_migrations SET checksum = $1 WHERE migration_name = $2`, ['0'.repeat(64), target.name]),
    );
    const err = await m.deploy({ databaseUrl: urlFor(dbMain), log: quiet }).then(
      () => null,
      (e: unknown) => e as Error & { code?: string },
    );
    expect(err).toBeInstanceOf(m.MigrationError);
    expect(err?.code).toBe('EDITED_MIGRATION');
    expect(err?.message).toContain(`Migration \`${target.name}\` was modified after it was applied`);

    // The CLI reports it as a one-line error, exit code 1, no stack trace.
    const cli = await execFileAsync(process.execPath, [CLI, 'deploy'], {
      env: { ...process.env, DATABASE_URL: urlFor(dbMain) },
      cwd: REPO_ROOT,
    }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(cli?.code).toBe(1);
    expect(cli?.stderr).toMatch(/^Error: Cannot apply migrations/);
    expect(cli?.stderr).not.toMatch(/\n\s+at /);
  });

  it('honours ?schema= (tables and _prisma_migrations live in that schema)', async () => {
    const url = urlFor(dbSchema, '?schema=tenant_a');
    const result = await m.deploy({ databaseUrl: url, log: quiet });
    expect(result.applied).toEqual(folders.map((f) => f.name));
    const bySchema = await withClient(urlFor(dbSchema), async (c) =>
      (
        await c.query(
          `SELECT schemaname, count(*)::int AS n FROM pg_tables
            WHERE tablename IN ('namespaces', 'generations', 'api_keys', '_prisma_migrations') GROUP BY 1`,
        )
      ).rows,
    );
    expect(bySchema).toEqual([{ schemaname: 'tenant_a', n: 4 }]);
    expect((await m.deploy({ databaseUrl: url, log: quiet })).applied).toEqual([]);
  });

  it('fails with a clear message (no stack trace) when PostgreSQL is unreachable', async () => {
    const cli = await execFileAsync(process.execPath, [CLI, 'deploy'], {
      env: { ...process.env, DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/atelier' },
      cwd: REPO_ROOT,
    }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(cli?.code).toBe(1);
    expect(cli?.stderr).toMatch(/Cannot connect to PostgreSQL/);
    expect(cli?.stderr).toMatch(/docker compose up -d postgres/);
    expect(cli?.stderr).not.toMatch(/\n\s+at /);
  });
});
