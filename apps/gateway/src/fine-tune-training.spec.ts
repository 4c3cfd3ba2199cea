import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { Prisma } from '@atelier/db';
import { buildAppsForTest, createTenant, freePort, startAppProcess, waitFor, type AppProcess, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';
import { uploadFiles } from './repos.harness';

type ColumnData = Parameters<typeof parquetWriteBuffer>[0]['columnData'];
const parquet = (columnData: ColumnData) => Buffer.from(parquetWriteBuffer({ columnData }));

/** A dataset in a vocabulary the base local-chat corpus does not have. */
const WORDS = ['lighthouse', 'barnacle', 'kelp', 'lantern', 'harbour', 'gull', 'tide', 'foghorn'];
const QA = {
  question: Array.from({ length: 40 }, (_, i) => `Where does the ${WORDS[i % 8]} keeper go at ${WORDS[(i + 3) % 8]} time?`),
  answer: Array.from({ length: 40 }, (_, i) => `The ${WORDS[(i + 1) % 8]} keeper walks past the ${WORDS[(i + 2) % 8]} and the ${WORDS[(i + 5) % 8]} by the ${WORDS[(i + 6) % 8]}.`),
};
const DATASET = parquet([
  { name: 'question', data: QA.question, type: 'STRING' },
  { name: 'answer', data: QA.answer, type: 'STRING' },
]);

interface FineTune {
  id: string;
  name: string;
  status: string;
  error: string | null;
  credits_used: string | null;
  trained_tokens: number | null;
  attempt: number;
  stop_requested: boolean;
  run_requested: boolean;
  tokenization: { tokens_x_epochs: number; estimated_cost: string } | null;
}
interface Lease {
  lease_id: string;
  attempt: number;
  heartbeat_seconds: number;
  fine_tune: FineTune;
  dataset: { url: string; sha256: string; size_bytes: number };
  resume_from: null | { step: number; files: { path: string; url: string }[] };
}

/**
 * Fine-tunes that train: the gateway in-process on a real port, the compiled fine-tune service
 * as its own process with the built-in trainer, and external trainers written here against the
 * documented routes only.
 */
describe('fine-tune runs and the trainer protocol', () => {
  let gw: GatewayHarness;
  let url: string;
  let build: ReturnType<typeof buildAppsForTest>;
  let service: AppProcess;
  let alice: Tenant;

  const api = async <T = Record<string, unknown>>(method: string, route: string, token: string, body?: unknown, raw?: Buffer) => {
    const res = await fetch(url + route, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined || raw ? { 'content-type': raw ? 'application/octet-stream' : 'application/json' } : {}) },
      body: raw ? new Uint8Array(raw) : body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T & { error: { type: string; message: string } } };
  };
  const fineTunes = (t: Tenant) => `/api/repos/${t.namespace}/ds/fine_tunes`;
  const get = async (t: Tenant, id: string) => (await api<{ fine_tune: FineTune }>('GET', `${fineTunes(t)}/${id}`, t.apiKey)).body.fine_tune;
  const until = (t: Tenant, id: string, status: string, timeoutMs = 60_000) =>
    waitFor(async () => {
      const ft = await get(t, id);
      if (ft.status === 'errored' && status !== 'errored') throw new Error(`fine-tune errored: ${ft.error}`);
      return ft.status === status ? ft : undefined;
    }, { timeoutMs, intervalMs: 100, description: `fine-tune ${id} to be ${status}` });
  /** A fine-tune of `baseModel` on the dataset, tokenized (ready to run). */
  const tokenized = async (t: Tenant, baseModel: string, params: Record<string, unknown> = {}) => {
    const res = await api<{ fine_tune: FineTune }>('POST', fineTunes(t), t.apiKey, {
      base_model: baseModel,
      script_type: 'text_generation',
      resource: 'main/qa.parquet',
      training_params: { question_column: 'question', answer_column: 'answer', ...params },
    });
    expect(res.status).toBe(201);
    expect((await api('POST', `${fineTunes(t)}/${res.body.fine_tune.id}/tokenize`, t.apiKey)).status).toBe(200);
    return until(t, res.body.fine_tune.id, 'tokenized', 20_000);
  };
  const newTenant = async (credits = '10') => {
    const t = await createTenant(gw.http, gw.adminToken, credits);
    expect((await api('POST', '/api/repos', t.apiKey, { namespace: t.namespace, name: 'ds' })).status).toBe(201);
    expect((await uploadFiles(gw.http, t.apiKey, `${t.namespace}/ds`, 'main', [{ field: 'files[]', filename: 'qa.parquet', content: DATASET }])).status).toBe(201);
    return t;
  };
  const trainer = async (baseModels: string[]) => {
    const res = await api<{ id: string; token: string }>('POST', '/api/admin/trainers', gw.adminToken, { name: 'test-trainer', base_models: baseModels });
    expect(res.status).toBe(201);
    expect(res.body.token).toMatch(/^trn_/);
    return res.body;
  };
  const lease = async (token: string, wait = 0) => api<Lease>('POST', '/api/trainer/lease', token, { wait_seconds: wait });
  const balance = async (t: Tenant) => (await api<{ credits: string; reserved: string }>('GET', '/api/credits', t.apiKey)).body;
  const price = (perMillion: string, tokens: number) => new Prisma.Decimal(perMillion).mul(tokens).div(1_000_000).toDecimalPlaces(6).toFixed();

  beforeAll(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    gw = await startGateway({ STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-train-')), PUBLIC_URL: url, TRAINER_HEARTBEAT_SECONDS: '1' });
    await gw.app.listen({ port, host: '127.0.0.1' });
    build = buildAppsForTest(['fine-tune']);
    service = await startAppProcess(build, gw.env, 'fine-tune', 'FINE_TUNE_PORT', {
      PUBLIC_URL: url,
      BUILTIN_TRAINER_API_URL: url,
      BUILTIN_TRAINER_STEP_MS: '20',
      TRAINER_HEARTBEAT_SECONDS: '1',
      TRAINER_SWEEP_INTERVAL_MS: '250',
      ...(gw.env.config.URL_SIGNING_SECRET ? { URL_SIGNING_SECRET: gw.env.config.URL_SIGNING_SECRET } : {}),
    });
    alice = await newTenant();
  }, 120_000);
  afterAll(async () => {
    if (service?.alive()) await new Promise((r) => (service.child.once('exit', r), service.child.kill('SIGTERM')));
    await gw?.close();
    build?.cleanup();
  });

  it('runs the whole loop on atelier/local-chat with the built-in trainer: events, checkpoints with a falling loss, the trained tokens charged exactly', async () => {
    const created = await api<{ fine_tune: FineTune }>('POST', fineTunes(alice), alice.apiKey, {
      base_model: 'atelier/local-chat',
      script_type: 'text_generation',
      resource: 'main/qa.parquet',
      training_params: { question_column: 'question', answer_column: 'answer', save_strategy: 'steps', save_steps_ratio: 0.25 },
    });
    expect(created.status).toBe(201);
    const id = created.body.fine_tune.id;
    // The owner's event stream sees every transition.
    const events = new AbortController();
    const seen: string[] = [];
    const stream = fetch(`${url}/api/events`, { headers: { authorization: `Bearer ${alice.apiKey}` }, signal: events.signal }).then(async (res) => {
      const decoder = new TextDecoder();
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        for (const m of decoder.decode(chunk).matchAll(/event: fine_tune\.status\ndata: (.*)\n/g)) seen.push((JSON.parse(m[1]) as { id: string; status: string }).id === id ? JSON.parse(m[1]).status : '');
      }
    }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));

    // From created: tokenized first, then enqueued, with no second call.
    const run = await api<{ fine_tune: FineTune }>('POST', `${fineTunes(alice)}/${id}/actions/run`, alice.apiKey);
    expect(run.status).toBe(200);
    expect(run.body.fine_tune.run_requested || run.body.fine_tune.status === 'enqueued').toBe(true);
    const done = await until(alice, id, 'completed');
    events.abort();
    await stream;
    expect(seen).toEqual(expect.arrayContaining(['tokenized', 'enqueued', 'running', 'completed']));
    expect(seen.indexOf('running')).toBeLessThan(seen.indexOf('completed'));

    // Charged exactly the tokens trained, at the base model's price; nothing left reserved.
    expect(done.trained_tokens).toBe(done.tokenization!.tokens_x_epochs);
    expect(done.credits_used).toBe(price('0.05', done.trained_tokens!));
    expect(await balance(alice)).toMatchObject({ reserved: '0' });
    expect(new Prisma.Decimal(10).minus((await balance(alice)).credits).toFixed()).toBe(done.credits_used);

    const cps = await api<{ total_checkpoints: number; checkpoints: { step: number; files: string[]; model_name: string; deployment_status: string; metrics: { loss: number } }[] }>(
      'GET', `${fineTunes(alice)}/${id}/checkpoints`, alice.apiKey);
    expect(cps.status).toBe(200);
    expect(cps.body.total_checkpoints).toBeGreaterThanOrEqual(3);
    const losses = cps.body.checkpoints.map((c) => c.metrics.loss);
    for (let i = 1; i < losses.length; i++) expect(losses[i]).toBeLessThan(losses[i - 1]);
    expect(cps.body.checkpoints[0]).toMatchObject({ files: ['adapter_config.json', 'adapter_model.json'], model_name: `${done.name}-step-${cps.body.checkpoints[0].step}`, deployment_status: 'not_deployed' });

    const logs = await api<{ logs: { type: string; step?: number; loss?: number }[] }>('GET', `${fineTunes(alice)}/${id}/logs?type=metrics`, alice.apiKey);
    expect(logs.body.logs.length).toBeGreaterThanOrEqual(losses.length);
    const status = await api('GET', `${fineTunes(alice)}/${id}/train_status`, alice.apiKey);
    expect(status.body).toMatchObject({ fine_tune_status: 'completed', phase: 'training', step: losses.length > 0 ? expect.any(Number) : null, lease: { state: 'finished', trainer: 'atelier-builtin' } });
  }, 120_000);

  it('serves an external trainer through the documented routes: lease, dataset bytes, events with a repeated seq, checkpoint upload, complete', async () => {
    const t = await trainer(['Qwen/Qwen3-0.6B']);
    // Nothing of its base models waits: 204 at once.
    expect((await lease(t.token)).status).toBe(204);
    const ft = await tokenized(alice, 'Qwen/Qwen3-0.6B');
    expect((await api<{ fine_tune: FineTune }>('POST', `${fineTunes(alice)}/${ft.id}/actions/run`, alice.apiKey)).body.fine_tune.status).toBe('enqueued');
    const reservedWhileQueued = (await balance(alice)).reserved;
    expect(reservedWhileQueued).toBe(new Prisma.Decimal(ft.tokenization!.estimated_cost).toFixed());

    const leased = await lease(t.token, 5);
    expect(leased.status).toBe(200);
    expect(leased.body).toMatchObject({ heartbeat_seconds: 1, attempt: 1, resume_from: null, fine_tune: { id: ft.id, status: 'enqueued' } });
    const bytes = Buffer.from(await (await fetch(leased.body.dataset.url)).arrayBuffer());
    expect(bytes.equals(DATASET)).toBe(true);
    expect(leased.body.dataset.sha256).toBe(createHash('sha256').update(DATASET).digest('hex'));
    // No second trainer gets the same run.
    expect((await lease(t.token)).status).toBe(204);

    const base = `/api/trainer/leases/${leased.body.lease_id}`;
    const first = await api<{ cancel: boolean; applied: number }>('POST', `${base}/events`, t.token, { events: [{ seq: 1, type: 'status', phase: 'training' }, { seq: 2, type: 'metrics', step: 1, loss: 2.5 }] });
    expect(first.body).toEqual({ cancel: false, applied: 2 });
    expect((await get(alice, ft.id)).status).toBe('running');
    // A retry of seq 2 (with other values) changes nothing.
    const repeated = await api<{ applied: number }>('POST', `${base}/events`, t.token, { events: [{ seq: 2, type: 'metrics', step: 1, loss: 99 }] });
    expect(repeated.body.applied).toBe(0);
    const adapter = Buffer.from('weights of step 1');
    const put = await api<{ sha256: string; size_bytes: number }>('PUT', `${base}/checkpoints/1/files/adapter_model.safetensors`, t.token, undefined, adapter);
    expect(put.status).toBe(201);
    expect(put.body).toMatchObject({ size_bytes: adapter.length, sha256: createHash('sha256').update(adapter).digest('hex') });
    expect((await api('POST', `${base}/events`, t.token, { events: [{ seq: 3, type: 'checkpoint', step: 1, metrics: { loss: 2.5 } }] })).status).toBe(200);
    const logs = await api<{ logs: { type: string; loss?: number }[] }>('GET', `${fineTunes(alice)}/${ft.id}/logs?type=metrics`, alice.apiKey);
    expect(logs.body.logs.map((l) => l.loss)).toEqual([2.5]);
    const cps = await api<{ checkpoints: { step: number; files: string[]; size_bytes: number }[] }>('GET', `${fineTunes(alice)}/${ft.id}/checkpoints`, alice.apiKey);
    expect(cps.body.checkpoints).toEqual([expect.objectContaining({ step: 1, files: ['adapter_model.safetensors'], size_bytes: adapter.length })]);

    const tokens = ft.tokenization!.tokens_x_epochs;
    const complete = await api<{ status: string; credits_used: string }>('POST', `${base}/complete`, t.token, { trained_tokens: tokens, final_step: 1 });
    expect(complete.status).toBe(200);
    const ended = await get(alice, ft.id);
    expect(ended).toMatchObject({ status: 'completed', trained_tokens: tokens, credits_used: price('0.4', tokens) });
    // The lease is over: every call on it is a 409, and charging twice is impossible.
    expect((await api('POST', `${base}/complete`, t.token, { trained_tokens: tokens })).status).toBe(409);
    expect((await api('POST', `${base}/events`, t.token, { events: [{ seq: 4, type: 'log', line: 'late' }] })).status).toBe(409);
    expect((await get(alice, ft.id)).credits_used).toBe(price('0.4', tokens));
  }, 60_000);

  it('stops an enqueued run at once (released) and a running one through its trainer (charged what it trained)', async () => {
    const t = await trainer(['Qwen/Qwen3-1.7B']);
    const queued = await tokenized(alice, 'Qwen/Qwen3-1.7B');
    expect((await api('POST', `${fineTunes(alice)}/${queued.id}/actions/run`, alice.apiKey)).status).toBe(200);
    const stopped = await api<{ fine_tune: FineTune }>('POST', `${fineTunes(alice)}/${queued.id}/actions/stop`, alice.apiKey);
    expect(stopped.body.fine_tune).toMatchObject({ status: 'stopped', credits_used: '0' });
    expect((await lease(t.token)).status).toBe(204);

    const running = await tokenized(alice, 'Qwen/Qwen3-1.7B');
    expect((await api('POST', `${fineTunes(alice)}/${running.id}/actions/run`, alice.apiKey)).status).toBe(200);
    const leased = await lease(t.token, 5);
    const base = `/api/trainer/leases/${leased.body.lease_id}`;
    expect((await api('POST', `${base}/events`, t.token, { events: [{ seq: 1, type: 'metrics', step: 1, loss: 1 }] })).body).toMatchObject({ cancel: false });
    const asked = await api<{ fine_tune: FineTune }>('POST', `${fineTunes(alice)}/${running.id}/actions/stop`, alice.apiKey);
    expect(asked.body.fine_tune).toMatchObject({ status: 'running', stop_requested: true });
    // The trainer hears it on its next call, and confirms with what it trained.
    expect((await api('POST', `${base}/events`, t.token, { events: [{ seq: 2, type: 'metrics', step: 2, loss: 0.9 }] })).body).toMatchObject({ cancel: true });
    const half = Math.floor(running.tokenization!.tokens_x_epochs / 2);
    expect((await api('POST', `${base}/complete`, t.token, { trained_tokens: half, final_step: 2 })).status).toBe(200);
    expect(await get(alice, running.id)).toMatchObject({ status: 'stopped', trained_tokens: half, credits_used: price('0.8', half) });
    // Stopping a stopped (or never run) fine-tune is a 409 naming its state.
    const again = await api('POST', `${fineTunes(alice)}/${running.id}/actions/stop`, alice.apiKey);
    expect(again.status).toBe(409);
    expect(again.body.error.message).toMatch(/'stopped'/);
  }, 60_000);

  it('hands the run of a trainer that dies to the next lease, which resumes from the last sealed checkpoint', async () => {
    const t = await trainer(['Qwen/Qwen3-4B']);
    const ft = await tokenized(alice, 'Qwen/Qwen3-4B');
    await api('POST', `${fineTunes(alice)}/${ft.id}/actions/run`, alice.apiKey);
    const first = await lease(t.token, 5);
    const base = `/api/trainer/leases/${first.body.lease_id}`;
    const weights = Buffer.from('step 2 weights');
    await api('PUT', `${base}/checkpoints/2/files/adapter_model.safetensors`, t.token, undefined, weights);
    await api('POST', `${base}/events`, t.token, { events: [{ seq: 1, type: 'metrics', step: 2, loss: 1.5 }, { seq: 2, type: 'checkpoint', step: 2 }] });
    expect((await get(alice, ft.id)).status).toBe('running');
    // The trainer dies: no call for 3 heartbeats, and the run is enqueued again.
    const second = await waitFor(async () => {
      const res = await lease(t.token, 1);
      return res.status === 200 ? res : undefined;
    }, { timeoutMs: 15_000, description: 'the run to be leased again' });
    expect(second.body).toMatchObject({ attempt: 2, resume_from: { step: 2 } });
    const file = second.body.resume_from!.files.find((f) => f.path === 'adapter_model.safetensors')!;
    expect(Buffer.from(await (await fetch(file.url)).arrayBuffer()).equals(weights)).toBe(true);
    // The lost lease is over for its trainer.
    expect((await api('POST', `${base}/events`, t.token, { events: [{ seq: 3, type: 'log', line: 'back' }] })).status).toBe(409);
    await api('POST', `/api/trainer/leases/${second.body.lease_id}/complete`, t.token, { trained_tokens: ft.tokenization!.tokens_x_epochs });
    expect(await get(alice, ft.id)).toMatchObject({ status: 'completed', attempt: 2 });
  }, 60_000);

  it('answers wrong states and inputs with 409, 402, 404, 400 and 401 in the error envelope', async () => {
    const t = await trainer(['Qwen/Qwen3-0.6B']);
    const missing = await api('POST', `${fineTunes(alice)}/00000000-0000-4000-8000-000000000000/actions/run`, alice.apiKey);
    expect(missing.status).toBe(404);
    const poor = await newTenant('0');
    const ft = await tokenized(poor, 'Qwen/Qwen3-0.6B');
    const refused = await api('POST', `${fineTunes(poor)}/${ft.id}/actions/run`, poor.apiKey);
    expect(refused.status).toBe(402);
    expect((await get(poor, ft.id)).status).toBe('tokenized');
    const created = await api<{ fine_tune: FineTune }>('POST', fineTunes(alice), alice.apiKey, {
      base_model: 'Qwen/Qwen3-0.6B',
      script_type: 'text_generation',
      resource: 'main/qa.parquet',
      training_params: { question_column: 'question', answer_column: 'answer' },
    });
    const stopCreated = await api('POST', `${fineTunes(alice)}/${created.body.fine_tune.id}/actions/stop`, alice.apiKey);
    expect(stopCreated.status).toBe(409);
    expect(stopCreated.body.error).toMatchObject({ type: 'invalid_state' });
    expect((await lease(t.token, 31)).status).toBe(400);
    expect((await api('POST', '/api/trainer/lease', alice.apiKey, {})).status).toBe(401);
    expect((await api('GET', `${fineTunes(alice)}/${ft.id}/checkpoints`, t.token)).status).toBe(401);
    expect((await api('POST', '/api/admin/trainers', gw.adminToken, { name: 'x', base_models: ['nope/model'] })).status).toBe(400);
    expect((await api('POST', '/api/trainer/leases/00000000-0000-4000-8000-000000000000/events', t.token, { events: [] })).status).toBe(404);
    expect((await api('POST', '/api/trainer/leases/x/events', t.token, { events: [{ seq: 0, type: 'log', line: 'x' }] })).status).toBe(400);
    expect((await api('DELETE', `/api/admin/trainers/${t.id}`, gw.adminToken)).status).toBe(200);
    await waitFor(async () => (await lease(t.token)).status === 401, { timeoutMs: 10_000, description: 'the revoked token to be refused' });
  }, 60_000);
});
