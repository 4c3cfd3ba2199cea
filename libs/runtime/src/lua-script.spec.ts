import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { testServers } from '@atelier/testing';
import { loadLuaScript, luaCommand, luaDirectory } from './lua-script';

describe('Lua scripts from .lua files', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'atelier-lua-'));
    fs.mkdirSync(path.join(dir, 'lua', 'includes'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'lua', 'includes', 'double.lua'), 'local function double(x) return x * 2 end\n');
    fs.writeFileSync(
      path.join(dir, 'lua', 'includes', 'quadruple.lua'),
      '--- @include "double"\nlocal function quadruple(x) return double(double(x)) end\n',
    );
    fs.writeFileSync(
      path.join(dir, 'lua', 'sum-twice-2.lua'),
      '--[[\n  KEYS[1], KEYS[2]: counters\n]]\n--- @include "includes/double"\n--- @include "includes/quadruple"\n' +
        "return double(tonumber(redis.call('GET', KEYS[1]) or '0') + tonumber(redis.call('GET', KEYS[2]) or '0')) + quadruple(tonumber(ARGV[1]))\n",
    );
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('takes the key count from the file name, and pulls each include in once', () => {
    const script = loadLuaScript(path.join(dir, 'lua'), 'sum-twice-2.lua');
    expect(script).toMatchObject({ command: 'atelierSumTwice', numberOfKeys: 2 });
    expect(script.lua.match(/local function double/g)).toHaveLength(1);
    expect(script.lua).not.toContain('@include');
  });

  it('runs on a real Redis as a command, keys first', async () => {
    const redis = new Redis(testServers().redis);
    try {
      const key = `atelier-lua-spec:${process.pid}`;
      await redis.set(`${key}:a`, '3');
      const run = luaCommand<number>(redis, loadLuaScript(path.join(dir, 'lua'), 'sum-twice-2.lua'));
      expect(await run(`${key}:a`, `${key}:b`, 5)).toBe(26);
      await redis.del(`${key}:a`);
    } finally {
      redis.disconnect();
    }
  });

  it("finds a lib's scripts beside compiled code, else in the source tree above it", () => {
    expect(luaDirectory(dir, 'nowhere')).toBe(path.join(dir, 'lua'));
    const compiled = path.join(dir, 'dist', 'local', 'libs', 'x', 'src');
    fs.mkdirSync(compiled, { recursive: true });
    fs.mkdirSync(path.join(dir, 'libs', 'x', 'src', 'lua'), { recursive: true });
    expect(luaDirectory(compiled, 'libs/x/src')).toBe(path.join(dir, 'libs', 'x', 'src', 'lua'));
    expect(() => luaDirectory(compiled, 'libs/missing/src')).toThrow(/Lua scripts not found/);
  });
});
