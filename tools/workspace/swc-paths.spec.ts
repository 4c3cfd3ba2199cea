// Compiled apps resolve @atelier/* through .swcrc's paths, the type checker through
// tsconfig.base.json's: a lib added to one and not the other builds, type-checks, then fails at
// start with "Cannot find module".
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');
const read = (file: string) => JSON.parse(readFileSync(path.join(root, file), 'utf8'));
const normalize = (paths: Record<string, string[]>) =>
  Object.fromEntries(Object.entries(paths).map(([alias, targets]) => [alias, targets.map((t) => t.replace(/^\.\//, ''))]));

it('.swcrc resolves every @atelier path alias exactly as tsconfig.base.json does', () => {
  expect(normalize(read('.swcrc').jsc.paths)).toEqual(normalize(read('tsconfig.base.json').compilerOptions.paths));
});

it('builds leave specs, harnesses and the testing lib out of what ships', () => {
  const out = mkdtempSync(path.join(tmpdir(), 'atelier-build-'));
  try {
    const build = spawnSync(process.execPath, [path.join(root, 'node_modules/@swc/cli/bin/swc.js'), 'apps/gateway/src', 'libs', '-d', out, '--config-file', '.swcrc', '--quiet'], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(build.status).toBe(0);
    const files = (readdirSync(out, { recursive: true }) as string[]).filter((f) => f.endsWith('.js'));
    expect(files).toContain(path.join('apps', 'gateway', 'src', 'main.js'));
    expect(files.filter((f) => /\.(spec|harness)\.js$/.test(f) || f.startsWith(path.join('libs', 'testing')))).toEqual([]);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
