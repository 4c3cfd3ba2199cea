#!/usr/bin/env node
// `npm run fuzz [-- --minutes 30] [--seed N]`: the schema-driven fuzzer of `npm test`
// (apps/gateway/src/fuzz.spec.ts) for as long as asked, with a random seed it prints first so a
// failure can be replayed (`npm run fuzz -- --seed N`). It needs Postgres and Redis as `npm test` does.
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import path from 'node:path';
import { root } from './bootstrap.mjs';

const args = process.argv.slice(2);
const arg = (name) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const seconds = Math.round(Number(arg('seconds') ?? Number(arg('minutes') ?? 5) * 60));
const seed = Number(arg('seed') ?? randomInt(1, 2 ** 31 - 1));
if (!Number.isFinite(seconds) || seconds <= 0) throw new Error('--minutes/--seconds must be positive');
console.log(`fuzz: ${seconds} s, seed ${seed} (replay with: npm run fuzz -- --seed ${seed} --seconds ${seconds})`);
const child = spawn(process.execPath, [path.join(root, 'tools/test.mjs'), 'apps/gateway/src/fuzz.spec.ts'], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, FUZZ_SECONDS: String(seconds), FUZZ_SEED: String(seed) },
});
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
