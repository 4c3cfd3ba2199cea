#!/usr/bin/env node
// `npm run admin -- <command>`: the operator CLI (apps/gateway/src/admin-cli.ts), built on demand.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { ensureRuntime, root } from './bootstrap.mjs';

ensureRuntime();
const build = spawnSync(
  process.execPath,
  [path.join(root, 'node_modules/@swc/cli/bin/swc.js'), 'apps/gateway/src', 'libs', '-d', 'dist/apps/gateway', '--config-file', '.swcrc', '--quiet'],
  { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] },
);
if (build.status !== 0) process.exit(build.status ?? 1);
const r = spawnSync(process.execPath, [path.join(root, 'dist/apps/gateway/apps/gateway/src/admin-cli.js'), ...process.argv.slice(2)], {
  cwd: root,
  stdio: 'inherit',
});
process.exit(r.status ?? 1);
