#!/usr/bin/env node
// `npm test`: finds Postgres and Redis for the integration tests, then runs every Jest project.
// Order: TEST_DATABASE_URL/TEST_REDIS_URL from the environment, then the local services on
// their default ports, then testcontainers (needs a Docker engine), else a clear message.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ensureRuntime, reachable, root } from './bootstrap.mjs';

ensureRuntime();


async function resolveServers() {
  const stops = [];
  let postgres = process.env.TEST_DATABASE_URL;
  let redis = process.env.TEST_REDIS_URL;
  if (!postgres && (await reachable('127.0.0.1', 5432))) postgres = 'postgresql://postgres@127.0.0.1:5432/postgres';
  if (!redis && (await reachable('127.0.0.1', 6379))) redis = 'redis://127.0.0.1:6379';
  if (!postgres || !redis) {
    try {
      if (!postgres) {
        const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
        const c = await new PostgreSqlContainer('postgres:16-alpine').start();
        stops.push(() => c.stop());
        postgres = c.getConnectionUri();
      }
      if (!redis) {
        const { RedisContainer } = await import('@testcontainers/redis');
        const c = await new RedisContainer('redis:7-alpine').start();
        stops.push(() => c.stop());
        redis = c.getConnectionUrl();
      }
    } catch (err) {
      console.error(
        `Integration tests need Postgres and Redis.\n` +
          `  - set TEST_DATABASE_URL and TEST_REDIS_URL, or\n` +
          `  - run them locally (docker compose up -d postgres redis, or your OS packages), or\n` +
          `  - have a Docker engine so testcontainers can start them.\n` +
          `testcontainers said: ${err.message}`,
      );
      process.exit(1);
    }
  }
  return { postgres, redis, stop: () => Promise.all(stops.map((s) => s())) };
}

const servers = await resolveServers();
const args = process.argv.slice(2);
const child = spawn(process.execPath, [path.join(root, 'node_modules/jest/bin/jest.js'), '-c', path.join(root, 'jest.config.cjs'), ...args], {
  cwd: root,
  stdio: 'inherit',
  env: {
    ...process.env,
    TEST_DATABASE_URL: servers.postgres,
    TEST_REDIS_URL: servers.redis,
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --experimental-vm-modules --no-warnings=ExperimentalWarning`.trim(),
  },
});
const code = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
await servers.stop();
process.exit(code);
