import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import { defaultCatalogDir } from '@atelier/models';
import {
  buildAppsForTest,
  createTestEnvironment,
  queryOnce,
  startAppProcess,
  startFakeOpenAiUpstream,
  uniqueName,
  waitFor,
  type AppProcess,
  type FakeOpenAiUpstream,
  type TestEnvironment,
} from '@atelier/testing';
import { FAKE_UPSTREAM_KEY, FAKE_UPSTREAM_KEY_ENV, remoteDefinition } from './chat.harness';

const LINES = 120;

/**
 * Crashes in the middle of batches and background responses, with real processes killed with
 * SIGKILL: a gateway and a queue-worker die while a batch's lines run; others take over. Every
 * line must be answered exactly once in the output file and charged exactly once in the books,
 * and a background response whose gateway died must still complete.
 */
describe('batches and background responses across crashes (real processes)', () => {
  let env: TestEnvironment;
  let build: ReturnType<typeof buildAppsForTest>;
  let upstream: FakeOpenAiUpstream;
  let catalogDir: string;
  const spawned: ChildProcess[] = [];
  // Short locks and sweeps, so work a dead process held is taken over in seconds (and a dead
  // gateway's chat reservation is given back seconds after its call could have ended).
  const timing = { JOB_LOCK_DURATION_MS: '1500', BATCH_SWEEP_INTERVAL_MS: '300', BATCH_WORKER_CONCURRENCY: '4', RPC_TIMEOUT_MS: '6000', RESERVATION_GRACE_MS: '1500', RESERVATION_SWEEP_INTERVAL_MS: '500' };
  const start = (name: string, portVar: string, extra: Record<string, string> = {}): Promise<AppProcess> =>
    startAppProcess(build, env, name, portVar, { ...timing, MODEL_CATALOG_DIR: catalogDir, [FAKE_UPSTREAM_KEY_ENV]: FAKE_UPSTREAM_KEY, MEDIA_FETCH_ALLOWED_HOSTS: '127.0.0.1', ...extra }, (c) => spawned.push(c));
  const sql = <T extends Record<string, unknown>>(text: string, params: unknown[] = []) => queryOnce<T>(env.databaseUrl, text, params);

  beforeAll(async () => {
    upstream = await startFakeOpenAiUpstream({ apiKey: FAKE_UPSTREAM_KEY, apiKeyEnv: FAKE_UPSTREAM_KEY_ENV });
    catalogDir = mkdtempSync(path.join(tmpdir(), 'atelier-batch-crash-catalog-'));
    for (const file of fs.readdirSync(defaultCatalogDir())) fs.copyFileSync(path.join(defaultCatalogDir(), file), path.join(catalogDir, file));
    // Lines that take 150 ms each, and a background answer that takes 4 s.
    fs.writeFileSync(path.join(catalogDir, 'remote-delay.json'), JSON.stringify(remoteDefinition('remote-delay', upstream.url, { upstream_model: 'delay-150' })));
    fs.writeFileSync(path.join(catalogDir, 'remote-long.json'), JSON.stringify(remoteDefinition('remote-long', upstream.url, { upstream_model: 'delay-4000' })));
    env = await createTestEnvironment({ STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-batch-crash-')) });
    build = buildAppsForTest(['gateway', 'chat', 'queue-worker']);
  }, 120_000);
  afterAll(async () => {
    for (const c of spawned) if (c.exitCode === null) c.kill('SIGKILL');
    build?.cleanup();
    await env?.cleanup();
    await upstream?.close();
    fs.rmSync(catalogDir, { recursive: true, force: true });
  });

  it('answers and charges every line exactly once when a gateway and a queue-worker are killed mid-batch, and finishes a background response whose gateway died', async () => {
    const gatewayA = await start('gateway', 'PORT');
    await start('chat', 'CHAT_PORT');
    const workerA = await start('queue-worker', 'QUEUE_WORKER_PORT', { QUEUE_WORKER_POOLS: 'batch' });
    const created = await fetch(`http://127.0.0.1:${gatewayA.port}/api/admin/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.config.ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: uniqueName(), credits: '10' }),
    });
    const { api_key: apiKey, namespace } = (await created.json()) as { api_key: string; namespace: string };
    const client = (port: number) => new OpenAI({ apiKey, baseURL: `http://127.0.0.1:${port}/api/ai`, maxRetries: 0, timeout: 20_000 });

    const lines = Array.from({ length: LINES }, (_, i) => ({ custom_id: `line-${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'remote-delay', messages: [{ role: 'user', content: `number ${i}` }], max_tokens: 20 } }));
    const file = await client(gatewayA.port).files.create({ file: await toFile(Buffer.from(lines.map((l) => JSON.stringify(l)).join('\n')), 'crash.jsonl'), purpose: 'batch' });
    const batch = await client(gatewayA.port).batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const background = await client(gatewayA.port).responses.create({ model: 'remote-long', input: 'outlive your gateway', background: true });

    // Both die with lines done, lines running and lines waiting, and the background response running on gateway A.
    await waitFor(async () => ((await client(gatewayA.port).batches.retrieve(batch.id)).request_counts?.completed ?? 0) >= 20, { timeoutMs: 30_000, description: '20 lines done' });
    expect((await client(gatewayA.port).responses.retrieve(background.id)).status).toBe('in_progress');
    const before = await client(gatewayA.port).batches.retrieve(batch.id);
    expect(before.request_counts!.completed).toBeLessThan(LINES);
    workerA.child.kill('SIGKILL');
    gatewayA.child.kill('SIGKILL');

    const gatewayB = await start('gateway', 'PORT');
    await start('queue-worker', 'QUEUE_WORKER_PORT', { QUEUE_WORKER_POOLS: 'batch' });
    const done = await waitFor(
      async () => {
        const b = await client(gatewayB.port).batches.retrieve(batch.id);
        return b.status === 'completed' ? b : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200, description: 'the batch to complete on the new processes' },
    );
    expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
    const output = (await (await client(gatewayB.port).files.content(done.output_file_id!)).text()).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { custom_id: string; response: { body: { choices: { message: { content: string } }[] } } });
    // Every line once, with its own answer.
    expect(output.map((l) => l.custom_id).sort()).toEqual(lines.map((l) => l.custom_id).sort());
    for (const l of output) expect(l.response.body.choices[0].message.content).toBe(`Echo: number ${l.custom_id.slice(5)}`);

    // Only the lines the dead worker was running (at most its 4 slots) reached the upstream twice.
    const calls = new Map<string, number>();
    for (const r of upstream.requests) {
      const text = JSON.stringify(r.body.messages ?? '');
      const m = /number (\d+)/.exec(text);
      if (m) calls.set(m[1], (calls.get(m[1]) ?? 0) + 1);
    }
    expect(calls.size).toBe(LINES);
    expect([...calls.values()].filter((n) => n > 1).length).toBeLessThanOrEqual(4);

    // The books: one reservation per line, each settled once, one charge each, nothing held; the credits spent are exactly those charges.
    const uuid = `${batch.id.slice(6, 14)}-${batch.id.slice(14, 18)}-${batch.id.slice(18, 22)}-${batch.id.slice(22, 26)}-${batch.id.slice(26)}`;
    const books = await sql<{ status: string; n: string; charged: string }>(
      `SELECT status::text, count(*)::text AS n, coalesce(sum(charged), 0)::text AS charged FROM credit_reservations WHERE reference LIKE $1 GROUP BY status`,
      [`batch:${uuid}:%`],
    );
    expect(books.map((b) => [b.status, Number(b.n)])).toEqual([['settled', LINES]]);
    const [charges] = await sql<{ n: string; total: string }>(
      `SELECT count(*)::text AS n, coalesce(-sum(l.amount), 0)::text AS total FROM credit_ledger l JOIN credit_reservations r ON r.id = l.reservation_id WHERE r.reference LIKE $1`,
      [`batch:${uuid}:%`],
    );
    expect(Number(charges.n)).toBe(LINES);
    expect(Number(charges.total)).toBeCloseTo(Number(books[0].charged), 6);

    // The background response runs again on gateway B (its job's lock lapsed with gateway A) and completes.
    const finished = await waitFor(
      async () => {
        const r = await client(gatewayB.port).responses.retrieve(background.id);
        return r.status === 'completed' ? r : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200, description: 'the background response to complete on gateway B' },
    );
    expect(finished.output_text).toBe('Echo: outlive your gateway');
    // Once the dead gateway's reservation of the first run is swept, nothing stays reserved.
    await waitFor(async () => Number((await sql<{ reserved: string }>('SELECT reserved::text FROM namespaces WHERE name = $1', [namespace]))[0].reserved) === 0, {
      timeoutMs: 30_000,
      description: 'nothing reserved',
    });
  }, 180_000);
});
