// Containers start the apps through the Dockerfile's CMD, `npm start` and bench:media through
// tools/malloc-arenas.mjs: both must give the libvips apps, and only them, the arena limit, and
// leave an operator's own MALLOC_ARENA_MAX alone.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

interface MallocArenas {
  LIBVIPS_APPS: readonly string[];
  appEnvironment(app: string, env: Record<string, string | undefined>): Record<string, string | undefined>;
}

const root = path.resolve(__dirname, '../..');
const APPS = ['gateway', 'chat', 'media', 'queue-worker', 'events', 'fine-tune'];
let arenas: MallocArenas;
let bin: string;
let cmd: string[];

beforeAll(async () => {
  arenas = (await import(pathToFileURL(path.join(root, 'tools/malloc-arenas.mjs')).href)) as MallocArenas;
  const line = readFileSync(path.join(root, 'Dockerfile'), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('CMD '))
    .at(-1)!;
  cmd = JSON.parse(line.slice(4)) as string[];
  // A `node` first on PATH that prints what the real one would have been started with.
  bin = mkdtempSync(path.join(tmpdir(), 'atelier-cmd-'));
  writeFileSync(path.join(bin, 'node'), '#!/bin/sh\necho "MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX-unset}"\necho "NODE_OPTIONS=${NODE_OPTIONS-unset}"\n');
  chmodSync(path.join(bin, 'node'), 0o755);
});

afterAll(() => rmSync(bin, { recursive: true, force: true }));

/** A variable as the runtime image's CMD starts `app` with it (`unset` when it has none). */
function containerVariable(name: 'MALLOC_ARENA_MAX' | 'NODE_OPTIONS', app: string, operator?: string): string {
  const env: Record<string, string> = { PATH: `${bin}:${process.env.PATH}`, APP: app };
  if (operator !== undefined) env[name] = operator;
  const run = spawnSync(cmd[0], cmd.slice(1), { env, encoding: 'utf8' });
  expect(run.status).toBe(0);
  return new RegExp(`^${name}=(.*)$`, 'm').exec(run.stdout)![1];
}
const containerArenaMax = (app: string, operator?: string) => containerVariable('MALLOC_ARENA_MAX', app, operator);

it('the runtime image runs media and queue-worker with two malloc arenas, the other apps with glibc\'s default', () => {
  expect(cmd[0]).toBe('sh');
  expect(Object.fromEntries(APPS.map((app) => [app, containerArenaMax(app)]))).toEqual({
    gateway: 'unset',
    chat: 'unset',
    media: '2',
    'queue-worker': '2',
    events: 'unset',
    'fine-tune': 'unset',
  });
});

it('npm start gives the same apps the same limit as the image does', () => {
  for (const app of APPS) {
    const local = arenas.appEnvironment(app, { PATH: '/bin' }).MALLOC_ARENA_MAX ?? 'unset';
    expect(`${app}: ${local}`).toBe(`${app}: ${containerArenaMax(app)}`);
  }
  expect([...arenas.LIBVIPS_APPS].sort()).toEqual(['media', 'queue-worker']);
});

it("an operator's MALLOC_ARENA_MAX wins, in the image and under npm start", () => {
  expect(containerArenaMax('media', '8')).toBe('8');
  expect(arenas.appEnvironment('queue-worker', { MALLOC_ARENA_MAX: '8' }).MALLOC_ARENA_MAX).toBe('8');
  expect(containerArenaMax('gateway', '4')).toBe('4');
});

it('the events app, and only it, caps V8\'s young generation, in the image and under npm start; an operator\'s NODE_OPTIONS keeps its own size', () => {
  for (const app of APPS) {
    const expected = app === 'events' ? '--max-semi-space-size=2' : 'unset';
    expect(`${app}: ${containerVariable('NODE_OPTIONS', app)}`).toBe(`${app}: ${expected}`);
    expect(`${app}: ${arenas.appEnvironment(app, { PATH: '/bin' }).NODE_OPTIONS ?? 'unset'}`).toBe(`${app}: ${expected}`);
  }
  expect(containerVariable('NODE_OPTIONS', 'events', '--max-old-space-size=512')).toBe('--max-old-space-size=512 --max-semi-space-size=2');
  expect(arenas.appEnvironment('events', { NODE_OPTIONS: '--max-old-space-size=512' }).NODE_OPTIONS).toBe('--max-old-space-size=512 --max-semi-space-size=2');
  expect(containerVariable('NODE_OPTIONS', 'events', '--max-semi-space-size=8')).toBe('--max-semi-space-size=8');
  expect(arenas.appEnvironment('events', { NODE_OPTIONS: '--max-semi-space-size=8' }).NODE_OPTIONS).toBe('--max-semi-space-size=8');
});
