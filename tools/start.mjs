#!/usr/bin/env node
// `npm start`: everything needed to run atelier locally, in one command. Installs what is
// missing, checks Postgres/Redis, applies migrations, builds and starts the six services,
// waits for their health, prints the base URL and a demo API key. Ctrl-C stops everything.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { APPS, READINESS_PATH } from './apps.mjs';
import { ensureRuntime, reachable, root } from './bootstrap.mjs';
import { appEnvironment } from './malloc-arenas.mjs';
import { supervise } from './supervisor.mjs';

ensureRuntime();

const COLORS = [36, 35, 33, 32, 34, 31];

const env = { ...process.env };
env.NODE_ENV ??= 'development';
env.DATABASE_URL ||= 'postgresql://postgres@127.0.0.1:5432/atelier';
env.REDIS_URL ||= 'redis://127.0.0.1:6379';
const production = env.NODE_ENV === 'production';

function fail(message) {
  console.error(`\n${message}\n`);
  process.exit(1);
}


/**
 * Every local install defaults to the same database, so a "fresh" start may inherit an old demo
 * user and its spent credits: say so, and how to start fresh.
 */
async function sayIfReused() {
  const pg = (await import('pg')).default;
  const url = new URL(env.DATABASE_URL);
  const name = decodeURIComponent(url.pathname.slice(1)) || 'postgres';
  const client = new pg.Client({ connectionString: env.DATABASE_URL });
  try {
    await client.connect();
    const users = await client.query('SELECT count(*)::int AS n FROM users').catch(() => undefined);
    if (!users || users.rows[0].n === 0) return;
    const demo = await client
      .query(`SELECT n.credits::text AS credits FROM namespaces n WHERE n.name = $1`, [env.DEMO_USER ?? 'demo'])
      .catch(() => ({ rows: [] }));
    const credits = demo.rows[0] ? `, ${env.DEMO_USER ?? 'demo'} has ${Number(demo.rows[0].credits)} credits left` : '';
    console.log(
      `Reusing the existing database '${name}' (${users.rows[0].n} user(s)${credits}). ` +
        `To start fresh: node tools/db/migrate.mjs reset --force, or set DATABASE_URL to another database.`,
    );
  } catch {
    // No database yet (migrations create it) or no access: nothing to say.
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function checkDependencies() {
  const pg = new URL(env.DATABASE_URL);
  const redis = new URL(env.REDIS_URL);
  const missing = [];
  if (!(await reachable(pg.hostname, Number(pg.port || 5432)))) missing.push(`PostgreSQL at ${pg.hostname}:${pg.port || 5432} (DATABASE_URL)`);
  if (!(await reachable(redis.hostname, Number(redis.port || 6379)))) missing.push(`Redis at ${redis.hostname}:${redis.port || 6379} (REDIS_URL)`);
  if (missing.length)
    fail(
      `atelier needs PostgreSQL and Redis, but cannot reach:\n  - ${missing.join('\n  - ')}\n\n` +
        `Start them with Docker:        docker compose up -d postgres redis\n` +
        `or with your OS packages, e.g. sudo apt-get install postgresql redis-server  (then start both services)\n` +
        `or point DATABASE_URL / REDIS_URL at servers you already run.`,
    );
}

function adminToken() {
  if (env.ADMIN_TOKEN || production) return env.ADMIN_TOKEN;
  // Outside production, a stable local admin token so the operator API works out of the box.
  const file = path.join(root, 'var/admin-token');
  if (!existsSync(file)) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${randomBytes(24).toString('hex')}\n`, { mode: 0o600 });
  }
  return readFileSync(file, 'utf8').trim();
}

function build() {
  const r = spawnSync(
    process.execPath,
    [path.join(root, 'node_modules/@swc/cli/bin/swc.js'), 'apps', 'libs', '-d', 'dist/local', '--config-file', '.swcrc', '--quiet'],
    { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  if (r.status !== 0) fail('Building the services failed (see above).');
  // The web console: static files the gateway serves under /console (dist/console).
  const vite = spawnSync(process.execPath, [path.join(root, 'node_modules/vite/bin/vite.js'), 'build', '--config', 'apps/console/vite.config.mts', '--logLevel', 'error'], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  if (vite.status !== 0) fail('Building the console failed (see above).');
}

async function waitHealthy(app, timeoutMs = 60_000) {
  const port = env[app.portVar] ?? app.port;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}${READINESS_PATH}`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${app.name} did not become healthy on port ${port} within ${timeoutMs / 1000}s`);
}

await checkDependencies();
await sayIfReused();
const { deploy } = await import('./db/migrations.mjs');
try {
  await deploy({ databaseUrl: env.DATABASE_URL, log: (line) => console.log(`migrate     | ${line}`) });
} catch (err) {
  fail(err.message);
}
env.ADMIN_TOKEN = adminToken() ?? '';
build();

// One crashed service is restarted (with backoff, its last lines printed); only a crash loop
// (5 exits of one service within a minute) stops the whole stack. Ctrl-C stops everything.
const colorOf = new Map(APPS.map((app, i) => [app.name, COLORS[i]]));
const supervisor = supervise(APPS, {
  spawnApp: (app) =>
    spawn(process.execPath, ['--enable-source-maps', path.join(root, `dist/local/apps/${app.name}/src/main.js`)], {
      cwd: root,
      env: appEnvironment(app.name, env),
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  onLine: (app, line, stream) =>
    (stream === 'stderr' ? process.stderr : process.stdout).write(`\x1b[${colorOf.get(app.name)}m${app.name.padEnd(12)}\x1b[0m| ${line}\n`),
  log: (message) => console.error(`\nsupervisor  | ${message}\n`),
  onGiveUp: () => stopAll(1),
});
let stopping = false;
function stopAll(code) {
  if (stopping) return;
  stopping = true;
  console.log('\nStopping atelier ...');
  void supervisor.stop(code).then((c) => process.exit(c));
}
process.on('SIGINT', () => stopAll(0));
process.on('SIGTERM', () => stopAll(0));
process.on('SIGHUP', () => stopAll(0));
// npm does not always pass signals on (e.g. `timeout npm start`); if whoever started us is
// gone, stop rather than leave six orphaned services holding the ports.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) stopAll(0);
}, 1000).unref();

try {
  await Promise.all(APPS.map((app) => waitHealthy(app)));
} catch (err) {
  console.error(err.message);
  stopAll(1);
}
if (!stopping) {
  const baseUrl = env.PUBLIC_URL ?? `http://localhost:${env.PORT ?? 8080}`;
  console.log(`\natelier is up: ${baseUrl}  (health: ${baseUrl}/health, console: ${baseUrl}/console)`);
  if (!production) {
    const demo = spawnSync(process.execPath, [path.join(root, 'dist/local/apps/gateway/src/admin-cli.js'), 'demo', '--key-file', path.join(root, 'var/demo-api-key')], {
      cwd: root,
      env,
      encoding: 'utf8',
    });
    if (demo.status === 0) {
      const { username, api_key: key, credits } = JSON.parse(demo.stdout);
      console.log(`Demo user '${username}' (${credits} credits), API key:\n  ${key}\n`);
      console.log(`  curl -H "Authorization: Bearer ${key}" ${baseUrl}/api/ai/models/local-image`);
    } else {
      // Every failure names its cause: the CLI's own words, else how it ended.
      const reason = (demo.stderr || demo.stdout || '').trim() || (demo.error ? demo.error.message : demo.signal ? `killed by ${demo.signal}` : `exit code ${demo.status}`);
      console.error(`Could not create the demo user: ${reason}`);
    }
    console.log(`Admin token (operator API, npm run admin): ${env.ADMIN_TOKEN}`);
  }
  console.log('Press Ctrl-C to stop.\n');
}
