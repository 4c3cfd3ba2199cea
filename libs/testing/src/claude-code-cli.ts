import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** The CLI version the recorded requests (libs/chat/src/messages/fixtures) come from. */
export const CLAUDE_CODE_VERSION = '2.1.328';

/**
 * The Claude Code CLI's binary, installed once from the npm registry into a cache outside any
 * checkout (`$ATELIER_TOOL_CACHE`, default ~/.cache/atelier): it is a 370 MB native binary, which
 * every clone's node_modules would otherwise download again. A broken or partial install is
 * replaced; the version is pinned so the test judges what the fixtures recorded.
 */
export function claudeCodeCli(cacheRoot = process.env.ATELIER_TOOL_CACHE ?? path.join(os.homedir(), '.cache', 'atelier')): string {
  const dir = path.join(cacheRoot, `claude-code-${CLAUDE_CODE_VERSION}`);
  const bin = path.join(dir, 'node_modules', '@anthropic-ai', 'claude-code', 'bin', 'claude.exe');
  const works = () => {
    try {
      return execFileSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000 }).startsWith(CLAUDE_CODE_VERSION);
    } catch {
      return false;
    }
  };
  if (works()) return bin;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  // Beside the test's own node, so the npm that comes with it installs.
  const npm = path.join(path.dirname(process.execPath), 'npm');
  execFileSync(fs.existsSync(npm) ? npm : 'npm', ['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', '--loglevel=error', `@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}`], {
    stdio: 'inherit',
    timeout: 10 * 60_000,
  });
  if (!works()) throw new Error(`Claude Code ${CLAUDE_CODE_VERSION} did not install into ${dir}`);
  return bin;
}
