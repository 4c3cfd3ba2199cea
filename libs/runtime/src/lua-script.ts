import fs from 'node:fs';
import path from 'node:path';
import type { RedisClient } from './redis-connection';

/**
 * A Lua script read from a `.lua` file, BullMQ-style (`src/commands` there): one script per file,
 * a header naming every KEYS[i] and ARGV[i], shared parts pulled in with
 * `--- @include "includes/<name>"` (each once), and the key count in the file name when it is
 * fixed (`queue-place-5.lua`: five keys; without one, the caller passes the count first).
 */
export interface LuaScript {
  /** The ioredis command it is defined as (`atelier` + the file name in camel case). */
  readonly command: string;
  readonly lua: string;
  readonly numberOfKeys?: number;
}

const INCLUDE = /^---\s*@include\s+"([^"]+)"\s*$/gm;

/**
 * Where a lib's `.lua` files are: beside its compiled code when the build copied them there (the
 * images do), else in the source tree above it (a local build in dist/ of this repository, like the
 * model catalog), found by walking up from `dir` to `<ancestor>/<sourceDir>`.
 */
export function luaDirectory(dir: string, sourceDir: string): string {
  const beside = path.join(dir, 'lua');
  if (fs.statSync(beside, { throwIfNoEntry: false })?.isDirectory()) return beside;
  for (let up = dir; ; up = path.dirname(up)) {
    const candidate = path.join(up, sourceDir, 'lua');
    if (fs.statSync(candidate, { throwIfNoEntry: false })?.isDirectory()) return candidate;
    if (path.dirname(up) === up) break;
  }
  throw new Error(`Lua scripts not found beside ${dir} nor in ${sourceDir}/lua above it`);
}

function expandIncludes(text: string, dir: string, seen: Set<string>): string {
  return text.replace(INCLUDE, (_, name: string) => {
    const file = path.resolve(dir, `${name}.lua`);
    if (seen.has(file)) return '';
    seen.add(file);
    return expandIncludes(fs.readFileSync(file, 'utf8'), path.dirname(file), seen);
  });
}

/** This lib's own scripts (libs/runtime/src/lua), located once for every runtime module that loads one. */
export const RUNTIME_LUA = luaDirectory(__dirname, 'libs/runtime/src');

/** Reads `<dir>/<file>` with its includes, once, at module load (never per call). */
export function loadLuaScript(dir: string, file: string): LuaScript {
  const base = path.basename(file, '.lua');
  const counted = /^(.*)-(\d+)$/.exec(base);
  const name = counted ? counted[1] : base;
  const command = 'atelier' + name.replace(/(^|-)([a-z])/g, (_, __, c: string) => c.toUpperCase());
  const full = path.join(dir, file);
  const lua = expandIncludes(fs.readFileSync(full, 'utf8'), path.dirname(full), new Set([full]));
  return counted ? { command, lua, numberOfKeys: Number(counted[2]) } : { command, lua };
}

/**
 * The script as a command of `client`, defined on first use (ioredis sends EVALSHA and falls back
 * to EVAL when Redis has lost its script cache, e.g. after a restart).
 */
export function luaCommand<R = unknown>(client: RedisClient, script: LuaScript): (...args: (string | number)[]) => Promise<R> {
  const commands = client as unknown as Record<string, (...a: (string | number)[]) => Promise<R>>;
  if (!commands[script.command]) {
    client.defineCommand(script.command, script.numberOfKeys === undefined ? { lua: script.lua } : { lua: script.lua, numberOfKeys: script.numberOfKeys });
  }
  return commands[script.command].bind(client);
}
