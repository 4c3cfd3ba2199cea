#!/usr/bin/env node
// `npm run images:smoke`: runs what `npm run images` built, as a platform team would. The migrate
// image against a fresh database on the host's Postgres, then the six services as containers
// (host network, each on a free port; a throwaway Redis; one shared storage volume), waiting for
// each one's readiness probe and its image's HEALTHCHECK. Through the gateway container: the web
// console's page and script, one chat
// completion, one synchronous image, and one queued generation with its completion event. Then
// SIGTERM to all and every container must exit 0 within its grace period.
//   TEST_DATABASE_URL / DATABASE_URL: the Postgres to create the smoke database on.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { APPS, LIVENESS_PATH, READINESS_PATH } from '../apps.mjs';
import { ensureRuntime, reachable } from '../bootstrap.mjs';
import { checkThroughGateway, expect } from './gateway-checks.mjs';
import { imageExists, imageName, podman, podmanAsync, podmanAvailable } from './podman.mjs';

ensureRuntime();
const { default: pg } = await import('pg');
const { freePort } = await import('../bench/bench-env.mjs');

/** Longer than any app's drain with nothing in flight; a container still running is then killed (exit 137). */
const GRACE_SECONDS = 30;
const run = randomBytes(4).toString('hex');
const containers = [];
const cleanups = [];
let failed = false;

function step(message) {
  console.log(`smoke | ${message}`);
}

async function until(what, check, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function main() {
  if (!podmanAvailable()) throw new Error('podman is missing: apt-get install podman runc, then npm run images');
  for (const app of ['migrate', ...APPS.map((a) => a.name)])
    if (!imageExists(imageName(app))) throw new Error(`${imageName(app)} is missing: npm run images`);

  // A database of its own on the host's Postgres.
  const adminUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
  const database = `atelier_smoke_${run}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  cleanups.push(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  });
  const databaseUrl = Object.assign(new URL(adminUrl), { pathname: `/${database}` }).toString();

  // A throwaway Redis, so nothing of the host's is touched.
  const redisPort = await freePort();
  const redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  cleanups.push(() => redis.kill('SIGKILL'));
  await until('redis', () => reachable('127.0.0.1', redisPort), 10_000);

  // One storage volume for all: the queue worker writes what the gateway serves. The apps run as uid 1000.
  const storage = mkdtempSync(path.join(os.tmpdir(), 'atelier-smoke-'));
  chmodSync(storage, 0o777);
  cleanups.push(() => rmSync(storage, { recursive: true, force: true }));

  const ports = Object.fromEntries(await Promise.all(APPS.map(async (app) => [app.name, await freePort()])));
  const adminToken = randomBytes(16).toString('hex');
  const baseUrl = `http://127.0.0.1:${ports.gateway}`;
  const env = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: `redis://127.0.0.1:${redisPort}`,
    ADMIN_TOKEN: adminToken,
    URL_SIGNING_SECRET: randomBytes(16).toString('hex'),
    // Production keeps metrics off the public port unless they need a token (docs/operations.md, "Security").
    METRICS_TOKEN: randomBytes(16).toString('hex'),
    PUBLIC_URL: baseUrl,
    STORAGE_DIR: '/data/storage',
    LOG_LEVEL: 'warn',
    ...Object.fromEntries(APPS.map((app) => [app.portVar, String(ports[app.name])])),
  };
  const envArgs = Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]);

  let started = Date.now();
  const migrate = podman(['run', '--rm', '--network', 'host', ...envArgs, imageName('migrate')], { allowFail: true });
  expect(migrate.status === 0, `the migrate image exited ${migrate.status}:\n${migrate.stdout}${migrate.stderr}`);
  step(`migrate: exit 0 in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  started = Date.now();
  for (const app of APPS) {
    const name = `atelier-smoke-${run}-${app.name}`;
    podman(['run', '-d', '--name', name, '--network', 'host', '-v', `${storage}:/data/storage`, '--stop-timeout', String(GRACE_SECONDS), ...envArgs, imageName(app.name)]);
    containers.push({ app, name });
  }
  await Promise.all(
    containers.map(({ app }) =>
      until(`${app.name}'s readiness probe`, async () => (await fetch(`http://127.0.0.1:${ports[app.name]}${READINESS_PATH}`)).ok),
    ),
  );
  for (const { app } of containers) expect((await fetch(`http://127.0.0.1:${ports[app.name]}${LIVENESS_PATH}`)).ok, `${app.name}: ${LIVENESS_PATH} is not 200`);
  step(`six services ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  // The image's own HEALTHCHECK (what docker and podman report), run once now.
  for (const { app, name } of containers) {
    const check = podman(['healthcheck', 'run', name], { allowFail: true });
    expect(check.status === 0, `${app.name}: the image's HEALTHCHECK failed: ${check.stdout}${check.stderr}`);
  }
  step('every image HEALTHCHECK passes');
  for (const { app, name } of containers) {
    const [pid1, uid] = podman(['exec', name, 'sh', '-c', 'cat /proc/1/comm; id -u']).stdout.trim().split('\n');
    expect(pid1 === 'tini' && uid === '1000', `${app.name}: PID 1 is ${pid1} and the app runs as uid ${uid} (want tini, 1000)`);
  }
  step('PID 1 is tini, the apps run as uid 1000');

  // A user and key, made with the admin CLI inside the gateway image.
  const gateway = containers.find((c) => c.app.name === 'gateway').name;
  const demo = podman(['exec', gateway, 'node', 'dist/apps/gateway/apps/gateway/src/admin-cli.js', 'demo', '--username', `smoke-${run}`, '--credits', '100']);
  const apiKey = JSON.parse(demo.stdout).api_key;
  expect(typeof apiKey === 'string', 'the admin CLI printed no api_key');
  await checkThroughGateway({ baseUrl, apiKey, step, cleanups });

  // SIGTERM to all at once, as a rollout or `docker compose down` does.
  started = Date.now();
  await Promise.all(containers.map(({ name }) => podmanAsync(['stop', '--time', String(GRACE_SECONDS), name])));
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  for (const { app, name } of containers) {
    const [state] = JSON.parse(podman(['inspect', name]).stdout);
    expect(state.State.ExitCode === 0, `${app.name} exited ${state.State.ExitCode} on SIGTERM (137: killed after the ${GRACE_SECONDS} s grace period)`);
  }
  step(`SIGTERM: all six exited 0 within ${seconds} s (grace ${GRACE_SECONDS} s)`);
}

try {
  await main();
  step('passed');
} catch (err) {
  failed = true;
  console.error(`\nsmoke | FAILED: ${err.message}\n`);
  for (const { app, name } of containers) {
    const logs = podman(['logs', '--tail', '30', name], { allowFail: true });
    console.error(`--- ${app.name} (last lines)\n${logs.stdout}${logs.stderr}`);
  }
} finally {
  for (const { name } of containers) podman(['rm', '-f', '-t', '0', name], { allowFail: true });
  for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
}
process.exit(failed ? 1 : 0);
