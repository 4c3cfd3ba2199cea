import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { buildAppsForTest, createTestEnvironment, repoRoot, SERVICE_APPS, startAppProcess, uniqueName, type AppProcess, type TestEnvironment } from '@atelier/testing';

/**
 * Every script in examples/ runs green against the real services (all six, compiled, as
 * `npm start` runs them), so the examples a newcomer copies never rot.
 */
describe('examples/', () => {
  let env: TestEnvironment;
  let build: ReturnType<typeof buildAppsForTest>;
  const apps: AppProcess[] = [];
  const spawned: ChildProcess[] = [];
  let baseUrl: string;
  let apiKey: string;

  beforeAll(async () => {
    env = await createTestEnvironment({ ADMIN_TOKEN: 'examples-admin-token-0123456789' });
    build = buildAppsForTest(SERVICE_APPS.map(([name]) => name));
    for (const [name, portVar] of SERVICE_APPS) {
      // The built-in trainer calls the gateway (started first) over HTTP, as in `npm start`.
      const extra = name === 'fine-tune' ? { BUILTIN_TRAINER_API_URL: `http://127.0.0.1:${apps[0].port}`, BUILTIN_TRAINER_STEP_MS: '20' } : {};
      apps.push(await startAppProcess(build, env, name, portVar, extra, (c) => spawned.push(c)));
    }
    baseUrl = `http://127.0.0.1:${apps[0].port}`;
    const res = await fetch(`${baseUrl}/api/admin/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.config.ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: uniqueName(), credits: '100' }),
    });
    apiKey = ((await res.json()) as { api_key: string }).api_key;
  }, 120_000);
  afterAll(async () => {
    for (const c of spawned) c.kill('SIGKILL');
    await env?.cleanup();
    build?.cleanup();
  });

  /**
   * What says which side stalled: the status of each generation the example enqueued (a job never
   * done, or an event never delivered), and the services' latest lines.
   */
  const stallReport = async (out: string): Promise<string> => {
    const ids = /^enqueued: (.+)$/m.exec(out)?.[1].split(', ') ?? [];
    const statuses = await Promise.all(
      ids.map((id) =>
        fetch(`${baseUrl}/api/ai/queue/${id}`, { headers: { authorization: `Bearer ${apiKey}` } })
          .then(async (res) => `${id}: ${((await res.json()) as { status?: string }).status ?? res.status}`)
          .catch((err: Error) => `${id}: ${err.message}`),
      ),
    );
    const services = apps.map((a) => `--- ${a.name} (last lines)\n${a.output().slice(-2000)}`);
    return [...statuses, ...services].join('\n');
  };

  /**
   * Runs one example as a user would (`node examples/<file>`); resolves with its output, or fails
   * with it, also when the example has not finished within `deadlineMs` (it is then killed).
   */
  const run = (file: string, { nodeOptions = [] as string[], deadlineMs = 20_000 } = {}) =>
    new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, [...nodeOptions, path.join(repoRoot, 'examples', file)], {
        cwd: repoRoot,
        env: { PATH: process.env.PATH, ATELIER_BASE_URL: baseUrl, ATELIER_API_KEY: apiKey },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let timedOut = false;
      const deadline = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
        void stallReport(out).then((report) => reject(new Error(`${file} had not finished after ${deadlineMs} ms:\n${out}\n${report}`)));
      }, deadlineMs);
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
      child.on('exit', (code) => {
        // Killed at the deadline: the stall report rejects.
        if (timedOut) return;
        clearTimeout(deadline);
        if (code === 0) resolve(out);
        else reject(new Error(`${file} exited with ${code}:\n${out}`));
      });
    });

  it('chat.mjs: a plain answer, a stream and a tool call through the OpenAI SDK', async () => {
    const out = await run('chat.mjs');
    expect(out).toMatch(/^plain: \S/m);
    expect(out).toMatch(/^stream: \S/m);
    expect(out).toMatch(/^tool call: get_weather \{.*"city"/m);
  });

  it('responses.mjs: an answer, a stream and a function call continued over previous_response_id', async () => {
    const out = await run('responses.mjs');
    expect(out).toMatch(/^response: resp_\S+ (completed|incomplete)$/m);
    expect(out).toMatch(/^text: \S/m);
    expect(out).toMatch(/^stream: \S/m);
    expect(out).toMatch(/^function call: get_weather \{.*"city"/m);
    expect(out).toMatch(/^after the tool: .*get_weather tool returned/m);
    expect(out).toMatch(/^conversation: message > function_call > function_call_output$/m);
  });

  it("anthropic.mjs: an answer, a stream, a tool round trip and a token count through Anthropic's SDK", async () => {
    const out = await run('anthropic.mjs');
    expect(out).toMatch(/^message: msg_\S+ (end_turn|max_tokens)$/m);
    expect(out).toMatch(/^text: \S/m);
    expect(out).toMatch(/^stream: \S/m);
    expect(out).toMatch(/^tool use: get_weather \{.*"city"/m);
    expect(out).toMatch(/^after the tool: \S/m);
    expect(out).toMatch(/^tokens: [1-9]\d*$/m);
  });

  it('batch.mjs: a batch uploaded, run, polled and its answers matched by custom_id; a background response polled', async () => {
    const out = await run('batch.mjs', { deadlineMs: 30_000 });
    expect(out).toMatch(/^batch: completed 3\/3 answered, \d+ tokens$/m);
    for (const id of ['q1', 'q2', 'q3']) expect(out).toMatch(new RegExp(`^${id}: Tell me about [\\w ]+\\. -> .+`, 'm'));
    expect(out).toMatch(/^background response: (completed|incomplete) -> .+/m);
  });

  it('learning-loop.mjs: stored completions judged, the good ones exported, trained on, deployed, and winning an adaptive experiment', async () => {
    const out = await run('learning-loop.mjs', { deadlineMs: 90_000 });
    const [, storedCount, good] = /^stored: (\d+) completions, (\d+) judged good$/m.exec(out) ?? [];
    expect(Number(storedCount)).toBe(60);
    expect(Number(good)).toBe(40);
    // Each good answer is a row, unless it is empty (left out, counted as skipped).
    const [, rows, skipped] = /^exported: (\d+) rows to data\/good\.parquet, (\d+) skipped \(Export \d+ stored completion/m.exec(out) ?? [];
    expect(Number(rows) + Number(skipped)).toBe(40);
    expect(Number(rows)).toBeGreaterThan(0);
    expect(out).toMatch(new RegExp(`^tokenized: ${rows} valid rows of ${rows}$`, 'm'));
    expect(out).toMatch(/^deployed: \S+-step-\d+$/m);
    expect(out).toMatch(/^answer: .*\b(lighthouse|lamp|keeper|fog|stairs|storm|ships?)\b/im);
    const deployed = /^deployed: (\S+)$/m.exec(out)![1];
    expect(out).toContain(`local-chat 0.5 / ${deployed} 0.5`);
    // The feedback favoured the fine-tune: the weights moved to it, local-chat keeps the 0.05 floor's neighbourhood.
    const [, localWeight, tuneWeight] = new RegExp(`^weights: local-chat ([\\d.]+) / ${deployed} ([\\d.]+)$`, 'm').exec(out) ?? [];
    expect(Number(tuneWeight)).toBeGreaterThan(0.9);
    expect(Number(localWeight)).toBeGreaterThanOrEqual(0.05);
    expect(out).toMatch(new RegExp(`^variant: ${deployed} \\d+ requests, p50 [\\d.]+ ms, 1\\.00 good \\[0\\.\\d+, 1\\]$`, 'm'));
    expect(out).toMatch(/^variant: local-chat \d+ requests, p50 [\d.]+ ms, 0\.00 good \[0, 0\.\d+\]$/m);
    expect(out).toContain(`promoted: ${deployed}; answered by ${deployed}`);
  });

  it('embeddings.mjs: vectors through the SDK, and the nearest document', async () => {
    const out = await run('embeddings.mjs');
    expect(out).toMatch(/^vectors: 4 of 256 dimensions$/m);
    expect(out).toMatch(/^nearest: The cat sat on the warm mat\.$/m);
  });

  it('images.mjs: generate, edit and the SDK images.generate', async () => {
    const out = await run('images.mjs');
    expect(out).toMatch(/^generated: seed \d+/m);
    expect(out).toMatch(/^edited: temporary link http/m);
    expect(out).toMatch(/^OpenAI SDK: temporary link http/m);
  });

  it('video.mjs: a synchronous video', async () => {
    expect(await run('video.mjs')).toMatch(/^video: temporary link http.*\.mp4/m);
  });

  it('queue-events.mjs: enqueue and receive the completion events', async () => {
    const out = await run('queue-events.mjs');
    expect(out.match(/^completed: \S+ succeeded http/gm)).toHaveLength(2);
    expect(out).toMatch(/^record: succeeded cost 0\.01 result http/m);
  });

  it('queue-events.mjs: still receives both events when they arrive before the enqueue answer is read', async () => {
    // A busy client can read the enqueue's answer after the generations completed. The preload
    // holds every POST answer back 1 s (local-image takes ~0.1 s); the event stream, a GET, is untouched.
    const slowPosts = `const f = globalThis.fetch;
      globalThis.fetch = async (input, init) => {
        const res = await f(input, init);
        if (init?.method === 'POST') await new Promise((r) => setTimeout(r, 1000));
        return res;
      };`;
    const out = await run('queue-events.mjs', { nodeOptions: [`--import=data:text/javascript,${encodeURIComponent(slowPosts)}`] });
    expect(out.match(/^completed: \S+ succeeded http/gm)).toHaveLength(2);
  });

  it('fine-tune.mjs: a Parquet dataset, uploaded, tokenized, trained by the built-in trainer, deployed and asked', async () => {
    const out = await run('fine-tune.mjs', { deadlineMs: 60_000 });
    expect(out).toMatch(/^uploaded: main\/train\.parquet by \S+/m);
    expect(out).toMatch(/^tokenized: tokenized \{.*"valid_rows":12/m);
    expect(out).toMatch(/^completed: charged 0\.\d+ credits for \d+ tokens/m);
    const [, first, last] = /^checkpoints: \d+, loss (\S+) -> (\S+)$/m.exec(out) ?? [];
    expect(Number(last)).toBeLessThan(Number(first));
    expect(out).toMatch(/^deployed: \S+-step-\d+$/m);
    expect(out).toMatch(/^answer: .*\b(orchard|cider|apple|harvest|press)\b/im);
  });
});
