import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { claudeCodeCli, createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';

/** Runs the CLI as a user would (`claude -p`), offline but for atelier; its exit code and output. */
function runClaude(bin: string, args: string[], opts: { cwd: string; env: Record<string, string> }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * The judge: the Claude Code CLI itself, pointed at atelier with ANTHROPIC_BASE_URL and an atelier
 * key, over a chat-only upstream (a real HTTP server) scripted to answer with a Write tool call and
 * then with text, under the model name Claude Code uses by default (a catalog alias).
 */
describe('Claude Code through atelier', () => {
  let stack: ChatStack;
  let payer: Tenant;
  let bin: string;
  let home: string;
  let project: string;

  beforeAll(async () => {
    bin = claudeCodeCli();
    stack = await startChatStack();
    payer = await createTenant(stack.gw.http, stack.gw.adminToken, '5');
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'atelier-claude-home-'));
    project = fs.mkdtempSync(path.join(os.tmpdir(), 'atelier-claude-project-'));
  }, 600_000);
  afterAll(async () => {
    await stack?.close();
    for (const dir of [home, project]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const cliEnv = (apiKey: string) => ({
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    ANTHROPIC_BASE_URL: `${stack.base}/api/anthropic`,
    ANTHROPIC_API_KEY: apiKey,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
  });

  it('writes the file the scripted model asks for, prints its answer, and the caller pays for both turns', async () => {
    // A catalog alias that is a Claude model name: Claude Code knows its window and says nothing.
    const run = await runClaude(bin, ['-p', 'please write a file hello.txt', '--model', 'claude-sonnet-4-6', '--allowedTools', 'Write'], { cwd: project, env: cliEnv(payer.apiKey) });
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
    expect(run.stdout).toContain('Wrote hello.txt.');
    expect(fs.readFileSync(path.join(project, 'hello.txt'), 'utf8')).toBe('written through the gateway\n');

    // Both turns reached the upstream as chat: the second carries the Write call's result, once.
    const turns = stack.upstream.requests.filter((r) => r.model === 'writer');
    expect(turns.length).toBeGreaterThanOrEqual(2);
    const last = turns.at(-1)!.body.messages as { role: string; tool_call_id?: string }[];
    expect(last.filter((m) => m.role === 'tool')).toEqual([expect.objectContaining({ tool_call_id: 'call_write_1' })]);

    await waitFor(async () => (await stack.gw.http.request<{ reserved: string }>('GET', '/api/credits', { token: payer.apiKey })).body.reserved === '0', { description: 'the charges to be settled' });
    const usage = await stack.gw.http.request<{ rows: { group: string; requests: number; cost: string }[] }>('GET', '/api/usage?group_by=endpoint', { token: payer.apiKey });
    const messages = usage.body.rows.find((r) => r.group === '/api/anthropic/v1/messages');
    expect(messages?.requests).toBe(turns.length);
    // 40 prompt and 12 completion tokens a turn at the test model's prices.
    expect(Number(messages?.cost)).toBeCloseTo(turns.length * (40 * 0.00001 + 12 * 0.00003), 6);
  }, 120_000);

  it('works the same over a native anthropic upstream, which gets its requests as Claude Code sent them', async () => {
    const native = await createTenant(stack.gw.http, stack.gw.adminToken, '5');
    // A model name Claude Code does not know: it is told the window (the catalog's context_window), or it warns.
    const env = { ...cliEnv(native.apiKey), CLAUDE_CODE_MAX_CONTEXT_TOKENS: '200000' };
    const run = await runClaude(bin, ['-p', 'please write a file native.txt', '--model', 'claude-native-writer', '--allowedTools', 'Write'], { cwd: project, env });
    expect(run.code).toBe(0);
    // Told the window, it no longer warns about it; it still notes the name it does not know, once.
    expect(run.stderr).not.toContain('context window');
    expect(run.stderr.trim().split('\n')).toEqual(['[claude-code:unrecognized_model] {"model":"claude-native-writer","query_source":"sdk"}']);
    expect(run.stdout).toContain('Wrote native.txt.');
    expect(fs.readFileSync(path.join(project, 'native.txt'), 'utf8')).toBe('written through the native upstream\n');
    const turns = stack.anthropicUpstream.requests.filter((r) => r.model === 'claude-writer');
    expect(turns.length).toBeGreaterThanOrEqual(2);
    // As Claude Code sent them: its betas, its cache_control marks, its tool_result block.
    expect(turns[0].beta).toContain('claude-code-20250219');
    expect(JSON.stringify(turns[0].body.system)).toContain('cache_control');
    const last = turns.at(-1)!.body.messages as { role: string; content: unknown }[];
    expect(JSON.stringify(last.at(-1))).toContain('"tool_use_id":"toolu_native_1"');
    await waitFor(async () => (await stack.gw.http.request<{ reserved: string }>('GET', '/api/credits', { token: native.apiKey })).body.reserved === '0', { description: 'the charges to be settled' });
    const usage = await stack.gw.http.request<{ rows: { group: string; requests: number; input_tokens: number }[] }>('GET', '/api/usage?group_by=endpoint', { token: native.apiKey });
    // Billed as the upstream reported: 30 + 4 + 10 input tokens a turn, cache included.
    expect(usage.body.rows).toEqual([expect.objectContaining({ group: '/api/anthropic/v1/messages', requests: turns.length, input_tokens: 44 * turns.length })]);
  }, 120_000);
});
