import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { createTenant, repoRoot, type Tenant } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';

/** Runs a command to its end: exit code and what it printed. */
function runProcess(command: string, args: string[], opts: { env: NodeJS.ProcessEnv; cwd: string; timeoutMs: number }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: opts.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('real agents against atelier (the Responses API)', () => {
  let stack: ChatStack;
  let user: Tenant;

  beforeAll(async () => {
    stack = await startChatStack();
    user = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('the OpenAI Agents SDK runs an agent with one function tool against local-chat', async () => {
    setTracingDisabled(true);
    setOpenAIAPI('responses');
    setDefaultOpenAIClient(stack.client(user.apiKey));
    const calls: string[] = [];
    const secretNumber = tool({
      name: 'secret_number',
      description: 'The secret number',
      parameters: z.object({}),
      execute: async () => {
        calls.push('secret_number');
        return '4217';
      },
    });
    const agent = new Agent({ name: 'Keeper', instructions: 'Use the tool.', model: 'local-chat', tools: [secretNumber] });
    const result = await run(agent, 'What is the secret number?');
    // local-chat called the tool (its name matches the question), the SDK ran it and sent its output back
    // over the Responses API, and the second turn answered in text that quotes the tool's result.
    expect(calls).toEqual(['secret_number']);
    expect(String(result.finalOutput)).toContain('4217');
    expect(result.rawResponses).toHaveLength(2);
  });

  it('the Codex CLI completes `codex exec "say hi"` against a chat-only upstream through atelier', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'atelier-codex-'));
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'atelier-codex-work-'));
    try {
      fs.writeFileSync(
        path.join(home, 'config.toml'),
        [
          'model = "remote-echo-wide"',
          'model_provider = "atelier"',
          '',
          '[model_providers.atelier]',
          'name = "atelier"',
          `base_url = "${stack.base}/api/ai"`,
          'env_key = "ATELIER_API_KEY"',
          'wire_api = "responses"',
          'request_max_retries = 0',
          'stream_max_retries = 0',
          '',
        ].join('\n'),
      );
      const before = stack.upstream.requests.length;
      const codex = path.join(repoRoot, 'node_modules', '.bin', 'codex');
      const result = await runProcess(codex, ['exec', '--skip-git-repo-check', 'say hi'], {
        cwd: work,
        env: { PATH: process.env.PATH, HOME: home, CODEX_HOME: home, ATELIER_API_KEY: user.apiKey },
        timeoutMs: 60_000,
      });
      expect({ code: result.code, stderr: result.code === 0 ? '' : result.stderr.slice(-2000) }).toEqual({ code: 0, stderr: '' });
      // The fake upstream echoes the last user message: Codex printed the upstream's words.
      expect(result.stdout).toContain('Echo: say hi');
      const sent = stack.upstream.requests.slice(before).find((r) => r.model === 'echo');
      expect(sent).toBeDefined();
      expect((sent!.body.messages as { role: string }[])[0].role).toBe('system');
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
      fs.rmSync(work, { recursive: true, force: true });
    }
  });
});
