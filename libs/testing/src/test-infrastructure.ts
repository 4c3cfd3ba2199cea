import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { Client } from 'pg';
import { parseConfig, type AppConfig } from '@atelier/config';

const run = promisify(execFile);

export interface TestEnvironment {
  config: AppConfig;
  databaseUrl: string;
  redisUrl: string;
  /** Redis prefix unique to this suite. */
  prefix: string;
  /** Drops the suite's database and Redis keys. */
  cleanup(): Promise<void>;
}

/**
 * The Postgres server and Redis the tests use. `npm test` (tools/test.mjs) resolves them once
 * per run: env URLs first, then the local services, then testcontainers; suites only read them.
 */
export function testServers(): { postgres: string; redis: string } {
  const postgres = process.env.TEST_DATABASE_URL;
  const redis = process.env.TEST_REDIS_URL;
  if (!postgres || !redis)
    throw new Error(
      'Integration tests need TEST_DATABASE_URL and TEST_REDIS_URL. Run them with `npm test`, which finds or starts ' +
        'Postgres and Redis, or set both (e.g. postgresql://postgres@127.0.0.1:5432/postgres and redis://127.0.0.1:6379).',
    );
  return { postgres, redis };
}

function repoRoot(): string {
  return path.resolve(__dirname, '../../..');
}

/**
 * A fresh, migrated database and a private Redis prefix for one suite, so suites (and
 * concurrent runs) never see each other's tenants, jobs or events.
 */
export async function createTestEnvironment(
  overrides: Record<string, string> = {},
  servers: { postgres: string; redis: string } = testServers(),
): Promise<TestEnvironment> {
  const id = `${Date.now().toString(36)}${randomBytes(4).toString('hex')}`;
  const dbName = `atelier_test_${id}`;
  const base = new URL(servers.postgres);
  const databaseUrl = new URL(base);
  databaseUrl.pathname = `/${dbName}`;
  // Creates the database itself and applies every migration, the same path production takes.
  await run(process.execPath, [path.join(repoRoot(), 'tools/db/migrate.mjs'), 'deploy'], {
    env: { ...process.env, DATABASE_URL: databaseUrl.toString(), NODE_OPTIONS: '' },
    cwd: repoRoot(),
  });
  const prefix = `atelier-test-${id}`;
  const config = parseConfig({
    NODE_ENV: 'test',
    DATABASE_URL: databaseUrl.toString(),
    REDIS_URL: servers.redis,
    REDIS_PREFIX: prefix,
    ADMIN_TOKEN: `admin-${randomBytes(16).toString('hex')}`,
    LOG_LEVEL: 'error',
    // Every suite's requests come from 127.0.0.1 and many expect a 401: the failure throttle is
    // tested on its own (auth-failures.spec.ts), with a low limit.
    AUTH_FAILURES_PER_MINUTE: '100000',
    ...overrides,
  });
  return {
    config,
    databaseUrl: databaseUrl.toString(),
    redisUrl: servers.redis,
    prefix,
    cleanup: async () => {
      await dropDatabase(servers.postgres, dbName);
      await deleteKeys(servers.redis, prefix);
    },
  };
}

async function dropDatabase(serverUrl: string, dbName: string): Promise<void> {
  const client = new Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

async function deleteKeys(redisUrl: string, prefix: string): Promise<void> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/**
 * One query on a fresh connection: for suites that stop and start their database server, where
 * a pooled connection would be stale.
 */
export async function queryOnce<T extends Record<string, unknown>>(databaseUrl: string, text: string, params: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query<T>(text, params)).rows;
  } finally {
    await client.end();
  }
}
