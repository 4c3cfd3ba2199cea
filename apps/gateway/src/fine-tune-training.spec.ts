import { createHash, createHmac } from 'node:crypto';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { describeImage, STYLE_SAMPLE_SIZE, StyleLearner } from '@atelier/fine-tune';
import { defaultCatalogDir } from '@atelier/models';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { Prisma, PrismaService } from '@atelier/db';
import { BlobStore } from '@atelier/storage';
import { buildAppsForTest, createTenant, freePort, QA_WORDS, qaDataset, startAppProcess, waitFor, type AppProcess, type Tenant } from '@atelier/testing';
import { startGateway, type GatewayHarness } from './gateway.harness';
import { uploadFiles } from './repos.harness';

type ColumnData = Parameters<typeof parquetWriteBuffer>[0]['columnData'];
const parquet = (columnData: ColumnData) => Buffer.from(parquetWriteBuffer({ columnData }));

/** A dataset in a vocabulary the base local-chat corpus does not have. */
const DATASET = qaDataset();

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
 * A vLLM-like server: serves a base model and loads LoRA adapters at run time from a directory
 * (`POST /v1/load_lora_adapter {lora_name, lora_path}`), answering 404 for an adapter it does not
 * hold. `restart()` forgets every adapter, as a restarted server does.
 */
async function startFakeLoraServer(base: string) {
  const loaded = new Map<string, Record<string, string>>();
  const loads: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const send = (status: number, json: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
      if (req.method === 'GET' && req.url === '/v1/models') return send(200, { object: 'list', data: [base, ...loaded.keys()].map((id) => ({ id, object: 'model' })) });
      const parsed = body ? (JSON.parse(body) as Record<string, unknown>) : {};
      if (req.method === 'POST' && req.url === '/v1/load_lora_adapter') {
        const dir = String(parsed.lora_path);
        // What a server does: read the adapter's files from the shared directory.
        const files = Object.fromEntries(readdirSync(dir).map((f) => [f, readFileSync(path.join(dir, f), 'utf8')]));
        loaded.set(String(parsed.lora_name), files);
        loads.push(String(parsed.lora_name));
        return send(200, { status: 'ok' });
      }
      if (req.method === 'POST' && req.url === '/v1/chat/completions') {
        const model = String(parsed.model);
        if (model !== base && !loaded.has(model)) return send(404, { object: 'error', message: `The model \`${model}\` does not exist.`, type: 'NotFoundError', code: 404 });
        const content = `answered by ${model} with ${JSON.stringify(loaded.get(model) ?? {})}`;
        return send(200, {
          id: 'chatcmpl-fake',
          object: 'chat.completion',
          created: 1,
          model,
          choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
        });
      }
      send(404, { message: 'not found' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    loads,
    restart: () => loaded.clear(),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
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
  let chat: AppProcess;
  let media: AppProcess;
  let queueWorker: AppProcess;
  let lora: Awaited<ReturnType<typeof startFakeLoraServer>>;
  let loraDir: string;
  /** A webhook receiver: every message with its headers. */
  const received: { headers: Record<string, string>; body: string }[] = [];
  let receiver: Server;
  let receiverUrl: string;
  const stalled: ServerResponse[] = [];
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
  const tokenized = async (t: Tenant, baseModel: string, params: Record<string, unknown> = {}, name?: string) => {
    const res = await api<{ fine_tune: FineTune }>('POST', fineTunes(t), t.apiKey, {
      ...(name !== undefined && { name }),
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
  /** A trainer of these base models; with `namespaces`, a team's trainer that leases only their runs. */
  const trainer = async (baseModels: string[], namespaces?: string[]) => {
    const res = await api<{ id: string; token: string }>('POST', '/api/admin/trainers', gw.adminToken, { name: 'test-trainer', base_models: baseModels, ...(namespaces && { namespaces }) });
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
    // The catalog plus a LoRA server for Qwen/Qwen3-0.6B fine-tunes.
    lora = await startFakeLoraServer('Qwen/Qwen3-0.6B');
    const catalog = mkdtempSync(path.join(tmpdir(), 'atelier-train-catalog-'));
    for (const file of readdirSync(defaultCatalogDir())) copyFileSync(path.join(defaultCatalogDir(), file), path.join(catalog, file));
    writeFileSync(path.join(catalog, 'qwen3-lora.json'), JSON.stringify({
      id: 'qwen3-0.6b-lora',
      created: 1767225600,
      owned_by: 'test',
      display_name: 'Qwen3 0.6B with LoRA adapters',
      description: 'A vLLM-like server started by the test',
      endpoint: '/chat/completions',
      capabilities: { input: ['text'], output: ['text'] },
      pricing: { method: 'token', input_cost_per_token: '0.000001', output_cost_per_token: '0.000002' },
      context_window: 8192,
      default_max_tokens: 64,
      features: { tools: false, json_mode: false, streaming: true },
      engine: { type: 'openai-compatible', base_url: lora.url, upstream_model: 'Qwen/Qwen3-0.6B', lora_base_model: 'Qwen/Qwen3-0.6B', max_retries: 0 },
      parameters: { type: 'object', properties: {} },
    }));
    receiver = createServer((req, res) => {
      // A link that never answers (a stalled dataset image), held until the test lets go.
      if (req.url === '/stall') return void stalled.push(res);
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push({ headers: req.headers as Record<string, string>, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
    const shared = {
      MODEL_CATALOG_DIR: catalog,
      LORA_ADAPTER_DIR: (loraDir = mkdtempSync(path.join(tmpdir(), 'atelier-lora-'))),
      MEDIA_FETCH_ALLOWED_HOSTS: `127.0.0.1:${(receiver.address() as AddressInfo).port}`,
    };
    gw = await startGateway({ STORAGE_DIR: mkdtempSync(path.join(tmpdir(), 'atelier-train-')), PUBLIC_URL: url, TRAINER_HEARTBEAT_SECONDS: '1', ...shared });
    await gw.app.listen({ port, host: '127.0.0.1' });
    build = buildAppsForTest(['fine-tune', 'chat', 'media', 'queue-worker']);
    chat = await startAppProcess(build, gw.env, 'chat', 'CHAT_PORT', { ...shared, LORA_RECONCILE_INTERVAL_MS: '500' });
    media = await startAppProcess(build, gw.env, 'media', 'MEDIA_PORT', shared);
    queueWorker = await startAppProcess(build, gw.env, 'queue-worker', 'QUEUE_WORKER_PORT', { ...shared, QUEUE_WORKER_POOLS: 'image' });
    service = await startAppProcess(build, gw.env, 'fine-tune', 'FINE_TUNE_PORT', {
      ...shared,
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
    for (const proc of [service, chat, media, queueWorker]) if (proc?.alive()) await new Promise((r) => (proc.child.once('exit', r), proc.child.kill('SIGTERM')));
    await gw?.close();
    await lora?.close();
    for (const res of stalled) res.destroy();
    await new Promise((r) => receiver?.close(r));
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
    let text = '';
    const stream = fetch(`${url}/api/events`, { headers: { authorization: `Bearer ${alice.apiKey}` }, signal: events.signal }).then(async (res) => {
      const decoder = new TextDecoder();
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) text += decoder.decode(chunk, { stream: true });
    }).catch(() => undefined);
    /** This fine-tune's statuses in the order its fine_tune.status events came (whole frames only). */
    const statuses = () =>
      [...text.matchAll(/event: fine_tune\.status\ndata: (.*)\n/g)].map((m) => JSON.parse(m[1]) as { id: string; status: string }).filter((d) => d.id === id).map((d) => d.status);
    await new Promise((r) => setTimeout(r, 200));

    // From created: tokenized first, then enqueued, with no second call; every transition also to the webhook.
    expect((await api('POST', `${fineTunes(alice)}/${id}/actions/run`, alice.apiKey, { webhook: 'ftp://example.com/x' })).status).toBe(400);
    const run = await api<{ fine_tune: FineTune }>('POST', `${fineTunes(alice)}/${id}/actions/run`, alice.apiKey, { webhook: receiverUrl });
    expect(run.status).toBe(200);
    expect(run.body.fine_tune.run_requested || run.body.fine_tune.status === 'enqueued').toBe(true);
    const done = await until(alice, id, 'completed');
    // The record can show completed a moment before its event is published (after the commit).
    await waitFor(() => statuses().includes('completed'), { timeoutMs: 5_000, description: 'the completed event' });
    events.abort();
    await stream;
    const seen = statuses();
    expect(seen).toEqual(expect.arrayContaining(['tokenized', 'enqueued', 'running', 'completed']));
    expect(seen.indexOf('running')).toBeLessThan(seen.indexOf('completed'));
    // The same transitions as signed webhook messages (Standard Webhooks, the namespace's secret).
    const secret = (await api<{ key: string }>('GET', '/api/webhooks/default/secret', alice.apiKey)).body.key;
    const messages = await waitFor(() => {
      const mine = received.map((m) => ({ ...m, parsed: JSON.parse(m.body) as { type: string; data: { id: string; status: string } } })).filter((m) => m.parsed.data.id === id);
      return mine.some((m) => m.parsed.data.status === 'completed') ? mine : undefined;
    }, { timeoutMs: 20_000, description: 'the completed webhook' });
    expect(messages.every((m) => m.parsed.type === 'fine_tune.status')).toBe(true);
    expect(messages.map((m) => m.parsed.data.status)).toEqual(expect.arrayContaining(['enqueued', 'running', 'completed']));
    for (const m of messages) {
      const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
      const expected = `v1,${createHmac('sha256', key).update(`${m.headers['webhook-id']}.${m.headers['webhook-timestamp']}.${m.body}`).digest('base64')}`;
      expect(m.headers['webhook-signature']).toBe(expected);
    }

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

    // Deploy the last checkpoint: a model of alice's namespace only, answering in the dataset's words.
    const last = cps.body.checkpoints[cps.body.checkpoints.length - 1];
    const deployed = await api<{ fine_tune: FineTune; model: { id: string; endpoint: string; base_model: string; owned_by: string } }>(
      'POST', `${fineTunes(alice)}/${id}/checkpoints/${last.step}/deploy`, alice.apiKey, { deployment_type: 'fast' });
    expect(deployed.status).toBe(200);
    expect(deployed.body).toMatchObject({ fine_tune: { status: 'deployed' }, model: { id: last.model_name, endpoint: '/chat/completions', base_model: 'atelier/local-chat', owned_by: alice.namespace } });
    expect((await api('POST', `${fineTunes(alice)}/${id}/checkpoints/${last.step}/deploy`, alice.apiKey, {})).status).toBe(409);
    expect((await api('POST', `${fineTunes(alice)}/${id}/checkpoints/${last.step}/deploy?retry=true`, alice.apiKey, {})).status).toBe(200);
    expect((await api('GET', `/api/ai/models/${last.model_name}`, alice.apiKey)).status).toBe(200);
    const listed = await api<{ data: { id: string }[] }>('GET', '/api/ai/models?endpoint=chat/completions', alice.apiKey);
    expect(listed.body.data.map((m) => m.id)).toEqual(expect.arrayContaining(['local-chat', last.model_name]));
    const bob = await createTenant(gw.http, gw.adminToken, '1');
    expect((await api('GET', `/api/ai/models/${last.model_name}`, bob.apiKey)).status).toBe(404);
    expect((await api<{ data: { id: string }[] }>('GET', '/api/ai/models', bob.apiKey)).body.data.map((m) => m.id)).not.toContain(last.model_name);

    const ask = async (model: string, token = alice.apiKey) =>
      api<{ model: string; choices: { message: { content: string } }[] }>('POST', '/api/ai/chat/completions', token, {
        model,
        messages: [{ role: 'user', content: 'Tell me about the lighthouse keeper.' }],
        max_tokens: 120,
        seed: 7,
      });
    const tuned = await ask(last.model_name);
    expect(tuned.status).toBe(200);
    expect(tuned.body.model).toBe(last.model_name);
    const vocabulary = new RegExp(`\\b(${QA_WORDS.join('|')})\\b`, 'gi');
    const tunedWords = tuned.body.choices[0].message.content.match(vocabulary) ?? [];
    const baseWords = (await ask('local-chat')).body.choices[0].message.content.match(vocabulary) ?? [];
    expect(tunedWords.length).toBeGreaterThanOrEqual(3);
    expect(tunedWords.length).toBeGreaterThan(baseWords.length);
    expect((await ask(last.model_name, bob.apiKey)).status).toBe(404);
  }, 120_000);

  it('trains atelier/local-image on a dataset of teal pictures, and the deployed model paints teal through images/generate and the queue', async () => {
    // Twelve pictures in teal and its neighbours: a bright sky over a darker lower half.
    const picture = (hue: number) => {
      const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64"><rect width="64" height="30" fill="hsl(${hue},70%,60%)"/><rect y="30" width="64" height="34" fill="hsl(${hue + 10},60%,30%)"/></svg>`;
      return sharp(Buffer.from(svg)).png().toBuffer();
    };
    const pictures = await Promise.all(Array.from({ length: 12 }, (_, i) => picture(175 + (i % 3) * 5)));
    const images = parquet([
      { name: 'caption', data: pictures.map((_, i) => `a teal landscape ${i}`), type: 'STRING' },
      { name: 'image', data: pictures.map((p) => new Uint8Array(p)), type: 'BYTE_ARRAY' },
    ]);
    expect((await uploadFiles(gw.http, alice.apiKey, `${alice.namespace}/ds`, 'main', [{ field: 'files[]', filename: 'teal.parquet', content: images }])).status).toBe(201);
    const created = await api<{ fine_tune: FineTune }>('POST', fineTunes(alice), alice.apiKey, {
      base_model: 'atelier/local-image',
      script_type: 'image_generation',
      resource: 'main/teal.parquet',
      training_params: { caption_column: 'caption', image_column: 'image', steps: 40 },
    });
    expect(created.status).toBe(201);
    const id = created.body.fine_tune.id;
    expect((await api('POST', `${fineTunes(alice)}/${id}/actions/run`, alice.apiKey)).status).toBe(200);
    const done = await until(alice, id, 'completed');
    // Charged per step, at the base model's price per step.
    expect(done.credits_used).toBe(new Prisma.Decimal('0.00005').mul(40).toFixed());
    const cps = await api<{ checkpoints: { step: number; model_name: string; metrics: { loss: number } }[] }>('GET', `${fineTunes(alice)}/${id}/checkpoints`, alice.apiKey);
    const last = cps.body.checkpoints[cps.body.checkpoints.length - 1];
    expect(last.step).toBe(40);
    const deployed = await api<{ model: { id: string; endpoint: string } }>('POST', `${fineTunes(alice)}/${id}/checkpoints/40/deploy`, alice.apiKey, {});
    expect(deployed.status).toBe(200);
    expect(deployed.body.model).toMatchObject({ id: last.model_name, endpoint: '/images/generate' });

    /** The dominant hue of a picture, by the same measure the trainer learns with. */
    const dominantHue = async (bytes: Buffer) => {
      const raw = await sharp(bytes).resize(STYLE_SAMPLE_SIZE, STYLE_SAMPLE_SIZE, { fit: 'fill' }).removeAlpha().raw().toBuffer();
      const learner = new StyleLearner();
      learner.learn(describeImage(raw, STYLE_SAMPLE_SIZE, STYLE_SAMPLE_SIZE));
      return learner.hues()[0];
    };
    const near = (hue: number, target: number) => Math.abs(((hue - target + 540) % 360) - 180) <= 30;
    const prompt = 'a red sunset over the desert';
    const generate = (model: string) =>
      api<{ images: { b64_json: string }[]; model: string }>('POST', '/api/ai/images/generate', alice.apiKey, { model, prompt, width: 256, height: 256, seed: 3, response_format: 'b64_json' });
    const tuned = await generate(last.model_name);
    expect(tuned.status).toBe(200);
    expect(tuned.body.model).toBe(last.model_name);
    const base = await generate('local-image');
    expect(near(await dominantHue(Buffer.from(tuned.body.images[0].b64_json, 'base64')), 182)).toBe(true);
    expect(near(await dominantHue(Buffer.from(base.body.images[0].b64_json, 'base64')), 182)).toBe(false);

    // The queue renders it the same way.
    const queued = await api<{ generations: { generation_id: string }[] }>('POST', '/api/ai/queue', alice.apiKey, { model: last.model_name, prompt, width: 256, height: 256, seed: 3 });
    expect(queued.status).toBe(200);
    const record = await waitFor(async () => {
      const r = await api<{ status: string; result_url: string | null; model_name: string }>('GET', `/api/ai/queue/${queued.body.generations[0].generation_id}`, alice.apiKey);
      if (r.body.status === 'failed') throw new Error(`the generation failed: ${JSON.stringify(r.body)}`);
      return r.body.status === 'succeeded' ? r.body : undefined;
    }, { timeoutMs: 30_000, description: 'the queued generation to succeed' });
    expect(record.model_name).toBe(last.model_name);
    expect(near(await dominantHue(Buffer.from(await (await fetch(record.result_url!)).arrayBuffer())), 182)).toBe(true);
  }, 90_000);

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
    // A file named after another's metadata (the local store kept it at `<key>.meta`) reaches nothing but itself.
    const meta = Buffer.from(JSON.stringify({ contentType: 'text/html' }));
    await api('PUT', `${base}/checkpoints/2/files/adapter_model.safetensors.meta`, t.token, undefined, meta);
    await api('POST', `${base}/events`, t.token, { events: [{ seq: 1, type: 'metrics', step: 2, loss: 1.5 }, { seq: 2, type: 'checkpoint', step: 2 }] });
    expect((await get(alice, ft.id)).status).toBe('running');
    // The trainer dies: no call for 3 heartbeats, and the run is enqueued again.
    const second = await waitFor(async () => {
      const res = await lease(t.token, 1);
      return res.status === 200 ? res : undefined;
    }, { timeoutMs: 15_000, description: 'the run to be leased again' });
    expect(second.body).toMatchObject({ attempt: 2, resume_from: { step: 2 } });
    const file = second.body.resume_from!.files.find((f) => f.path === 'adapter_model.safetensors')!;
    const served = await fetch(file.url);
    expect(served.headers.get('content-type')).not.toMatch(/text\/html/);
    expect(Buffer.from(await served.arrayBuffer()).equals(weights)).toBe(true);
    const metaFile = second.body.resume_from!.files.find((f) => f.path === 'adapter_model.safetensors.meta')!;
    expect(Buffer.from(await (await fetch(metaFile.url)).arrayBuffer()).equals(meta)).toBe(true);
    // The lost lease is over for its trainer.
    expect((await api('POST', `${base}/events`, t.token, { events: [{ seq: 3, type: 'log', line: 'back' }] })).status).toBe(409);
    await api('POST', `/api/trainer/leases/${second.body.lease_id}/complete`, t.token, { trained_tokens: ft.tokenization!.tokens_x_epochs });
    expect(await get(alice, ft.id)).toMatchObject({ status: 'completed', attempt: 2 });
  }, 60_000);

  it('deploys a checkpoint to a LoRA server: its files where the server reads them, chat by the model name, and a reload after the server restarts', async () => {
    const t = await trainer(['Qwen/Qwen3-0.6B', 'Qwen/Qwen3-1.7B']);
    const trained = async (baseModel: string) => {
      const ft = await tokenized(alice, baseModel);
      await api('POST', `${fineTunes(alice)}/${ft.id}/actions/run`, alice.apiKey);
      const leased = await lease(t.token, 5);
      expect(leased.body.fine_tune.id).toBe(ft.id);
      const base = `/api/trainer/leases/${leased.body.lease_id}`;
      await api('PUT', `${base}/checkpoints/1/files/adapter_config.json`, t.token, undefined, Buffer.from('{"r":16}'));
      await api('PUT', `${base}/checkpoints/1/files/adapter_model.safetensors`, t.token, undefined, Buffer.from('lora weights'));
      await api('POST', `${base}/events`, t.token, { events: [{ seq: 1, type: 'checkpoint', step: 1, metrics: { loss: 1 } }] });
      // Not deployable while it runs.
      expect((await api('POST', `${fineTunes(alice)}/${ft.id}/checkpoints/1/deploy`, alice.apiKey, {})).status).toBe(409);
      await api('POST', `${base}/complete`, t.token, { trained_tokens: 10, final_step: 1 });
      return ft;
    };
    const ft = await trained('Qwen/Qwen3-0.6B');
    expect((await api('POST', `${fineTunes(alice)}/${ft.id}/checkpoints/7/deploy`, alice.apiKey, {})).status).toBe(404);
    expect((await api('POST', `${fineTunes(alice)}/${ft.id}/checkpoints/1/deploy`, alice.apiKey, { deployment_type: 'instant' })).status).toBe(400);
    const deployed = await api<{ model: { id: string } }>('POST', `${fineTunes(alice)}/${ft.id}/checkpoints/1/deploy`, alice.apiKey, {});
    expect(deployed.status).toBe(200);
    const name = deployed.body.model.id;
    // Loaded under the deployment's own adapter name, never the public name another namespace may also use.
    expect(lora.loads).toEqual([expect.stringMatching(/^atelier-[0-9a-f-]{36}$/)]);
    const adapter = lora.loads[0];
    const chatWith = () => api<{ model: string; choices: { message: { content: string } }[] }>('POST', '/api/ai/chat/completions', alice.apiKey, { model: name, messages: [{ role: 'user', content: 'hi' }] });
    const first = await chatWith();
    expect(first.status).toBe(200);
    expect(first.body.model).toBe(name);
    // The server got the checkpoint's own bytes, and was asked for the adapter by its name.
    expect(first.body.choices[0].message.content).toBe(`answered by ${adapter} with ${JSON.stringify({ 'adapter_config.json': '{"r":16}', 'adapter_model.safetensors': 'lora weights' })}`);
    // The server restarts and forgets the adapter: the next chat loads it again and answers.
    lora.restart();
    const again = await chatWith();
    expect(again.status).toBe(200);
    expect(lora.loads.filter((n) => n === adapter).length).toBeGreaterThanOrEqual(2);
    // And without any chat, the periodic reconcile loads it back too.
    lora.restart();
    const before = lora.loads.length;
    await waitFor(() => lora.loads.length > before, { timeoutMs: 10_000, description: 'the reconcile to load the adapter again' });

    // A base model no server can serve: 409, saying so.
    const other = await trained('Qwen/Qwen3-1.7B');
    const refused = await api('POST', `${fineTunes(alice)}/${other.id}/checkpoints/1/deploy`, alice.apiKey, {});
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toMatch(/Nothing can serve fine-tunes of Qwen\/Qwen3-1.7B/);
  }, 60_000);

  /** A fine-tune of Qwen3-0.6B named `name`, trained by `t` to one sealed checkpoint holding `weights`. */
  const trainedCheckpoint = async (tenant: Tenant, t: { token: string }, name: string, weights: string) => {
    const ft = await tokenized(tenant, 'Qwen/Qwen3-0.6B', {}, name);
    await api('POST', `${fineTunes(tenant)}/${ft.id}/actions/run`, tenant.apiKey);
    const leased = await lease(t.token, 5);
    expect(leased.body.fine_tune.id).toBe(ft.id);
    const base = `/api/trainer/leases/${leased.body.lease_id}`;
    await api('PUT', `${base}/checkpoints/1/files/adapter_model.safetensors`, t.token, undefined, Buffer.from(weights));
    await api('POST', `${base}/events`, t.token, { events: [{ seq: 1, type: 'checkpoint', step: 1 }] });
    await api('POST', `${base}/complete`, t.token, { trained_tokens: 10, final_step: 1 });
    return ft;
  };

  it('keeps same-named LoRA deployments of two namespaces apart: their own folder, server-side name and weights, after a restart too; a refused deploy writes nothing', async () => {
    const ann = await newTenant();
    const ben = await newTenant();
    const annFt = await trainedCheckpoint(ann, await trainer(['Qwen/Qwen3-0.6B'], [ann.namespace]), 'shared', 'weights of ann');
    const benTrainer = await trainer(['Qwen/Qwen3-0.6B'], [ben.namespace]);
    const benFt = await trainedCheckpoint(ben, benTrainer, 'shared', 'weights of ben');
    const before = lora.loads.length;
    const deploy = (t: Tenant, id: string) => api<{ model: { id: string } }>('POST', `${fineTunes(t)}/${id}/checkpoints/1/deploy`, t.apiKey, {});
    expect((await deploy(ann, annFt.id)).body.model.id).toBe('shared-step-1');
    expect((await deploy(ben, benFt.id)).body.model.id).toBe('shared-step-1');
    const names = lora.loads.slice(before);
    expect(names).toHaveLength(2);
    expect(new Set(names).size).toBe(2);
    expect(names).not.toContain('shared-step-1');
    expect(readdirSync(loraDir)).toEqual(expect.arrayContaining(names));
    const chatAs = async (t: Tenant) =>
      (await api<{ choices: { message: { content: string } }[] }>('POST', '/api/ai/chat/completions', t.apiKey, { model: 'shared-step-1', messages: [{ role: 'user', content: 'hi' }] })).body.choices[0].message.content;
    expect(await chatAs(ann)).toContain('weights of ann');
    expect(await chatAs(ben)).toContain('weights of ben');
    // The server forgets both: each namespace's chat loads its own adapter back, never the other's.
    lora.restart();
    expect(await chatAs(ben)).toContain('weights of ben');
    expect(await chatAs(ann)).toContain('weights of ann');
    // A second fine-tune of ann's named the same: its deploy is refused before a file is written or loaded.
    const again = await trainedCheckpoint(ann, await trainer(['Qwen/Qwen3-0.6B'], [ann.namespace]), 'shared', 'overwrite attempt');
    const folders = readdirSync(loraDir).length;
    const loads = lora.loads.length;
    const refused = await deploy(ann, again.id);
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toBe(`A model named shared-step-1 already exists in namespace ${ann.namespace}`);
    expect(readdirSync(loraDir)).toHaveLength(folders);
    // Nothing of the refused deploy was loaded. The reconciler (every 500 ms here) may still be
    // loading the two deployments back after the restart above: those are not the refused one's.
    expect(lora.loads.slice(loads).filter((name) => !names.includes(name))).toEqual([]);
    expect(await chatAs(ann)).toContain('weights of ann');
  }, 90_000);

  it("binds a team's trainer to its namespaces: it never leases another namespace's run; the operator's trainer leases any", async () => {
    const gil = await newTenant();
    const hal = await newTenant();
    const gils = await trainer(['meta-llama/Llama-3.2-3B-Instruct'], [gil.namespace]);
    const halRun = await tokenized(hal, 'meta-llama/Llama-3.2-3B-Instruct');
    expect((await api('POST', `${fineTunes(hal)}/${halRun.id}/actions/run`, hal.apiKey)).status).toBe(200);
    expect((await lease(gils.token, 1)).status).toBe(204);
    const gilRun = await tokenized(gil, 'meta-llama/Llama-3.2-3B-Instruct');
    await api('POST', `${fineTunes(gil)}/${gilRun.id}/actions/run`, gil.apiKey);
    const leased = await lease(gils.token, 5);
    expect(leased.body.fine_tune.id).toBe(gilRun.id);
    const operators = await trainer(['meta-llama/Llama-3.2-3B-Instruct']);
    expect((await lease(operators.token, 5)).body.fine_tune.id).toBe(halRun.id);
    const listed = await api<{ trainers: { id: string; namespaces: string[] | null }[] }>('GET', '/api/admin/trainers', gw.adminToken);
    expect(listed.body.trainers.find((t) => t.id === gils.id)?.namespaces).toEqual([gil.namespace]);
    expect(listed.body.trainers.find((t) => t.id === operators.id)?.namespaces).toBeNull();
    const unknown = await api('POST', '/api/admin/trainers', gw.adminToken, { name: 'x', base_models: ['Qwen/Qwen3-0.6B'], namespaces: ['no-such-namespace-at-all'] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toBe('Unknown namespace(s): no-such-namespace-at-all');
  }, 60_000);

  it('leases the dataset bytes that were tokenized and charged, whatever the branch holds later', async () => {
    const ida = await newTenant();
    const t = await trainer(['meta-llama/Llama-3.2-1B-Instruct'], [ida.namespace]);
    const ft = await tokenized(ida, 'meta-llama/Llama-3.2-1B-Instruct');
    // After tokenization the branch's file becomes ten times larger.
    const bigger = parquet([
      { name: 'question', data: Array.from({ length: 400 }, (_, i) => `question ${i} ${QA_WORDS.join(' ')}`), type: 'STRING' },
      { name: 'answer', data: Array.from({ length: 400 }, (_, i) => `answer ${i} ${QA_WORDS.join(' ')}`), type: 'STRING' },
    ]);
    expect((await uploadFiles(gw.http, ida.apiKey, `${ida.namespace}/ds`, 'main', [{ field: 'files[]', filename: 'qa.parquet', content: bigger }])).status).toBe(201);
    await api('POST', `${fineTunes(ida)}/${ft.id}/actions/run`, ida.apiKey);
    const leased = await lease(t.token, 5);
    expect(leased.body.fine_tune.id).toBe(ft.id);
    expect(leased.body.dataset).toMatchObject({ sha256: createHash('sha256').update(DATASET).digest('hex'), size_bytes: DATASET.length });
    const served = Buffer.from(await (await fetch(leased.body.dataset.url)).arrayBuffer());
    expect(served.equals(DATASET)).toBe(true);
    await api('POST', `/api/trainer/leases/${leased.body.lease_id}/complete`, t.token, { trained_tokens: 1 });

    // The pinned bytes lost from storage: the run errors at its lease, saying so, and nothing is charged.
    const lost = await tokenized(ida, 'meta-llama/Llama-3.2-1B-Instruct');
    const prisma = gw.app.get(PrismaService);
    const pinned = await prisma.fineTune.findUniqueOrThrow({ where: { id: lost.id }, select: { datasetBlobKey: true, datasetSha256: true } });
    expect(pinned.datasetSha256).toBe(createHash('sha256').update(bigger).digest('hex'));
    await gw.app.get(BlobStore).delete(pinned.datasetBlobKey!);
    const before = await balance(ida);
    await api('POST', `${fineTunes(ida)}/${lost.id}/actions/run`, ida.apiKey);
    expect((await lease(t.token, 1)).status).toBe(204);
    const errored = await until(ida, lost.id, 'errored');
    expect(errored.error).toBe(`The dataset main/qa.parquet as tokenized (sha256 ${pinned.datasetSha256}) is no longer stored; tokenize the fine-tune again. Nothing was charged`);
    expect(await balance(ida)).toEqual(before);
  }, 60_000);

  it('refuses training parameters past their bounds (epochs 1-50, steps, save_steps_ratio) with a 400 naming the field', async () => {
    const create = (scriptType: string, params: Record<string, unknown>, base = 'Qwen/Qwen3-0.6B') =>
      api('POST', fineTunes(alice), alice.apiKey, { base_model: base, script_type: scriptType, resource: 'main/qa.parquet', training_params: { question_column: 'question', answer_column: 'answer', ...params } });
    for (const [params, field, message] of [
      [{ epochs: 51 }, 'training_params.epochs', 'must be <= 50, got 51'],
      [{ epochs: 1e9 }, 'training_params.epochs', 'must be <= 50, got 1000000000'],
      [{ save_steps_ratio: 0.000001 }, 'training_params.save_steps_ratio', 'must be >= 0.01, got 0.000001'],
    ] as const) {
      const res = await create('text_generation', params);
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.body)).toContain(field);
      expect(JSON.stringify(res.body)).toContain(message);
    }
    const steps = await api('POST', fineTunes(alice), alice.apiKey, { base_model: 'atelier/local-image', script_type: 'image_generation', resource: 'main/qa.parquet', training_params: { caption_column: 'question', image_column: 'answer', steps: 100_000_000 } });
    expect(steps.status).toBe(400);
    expect(JSON.stringify(steps.body)).toContain('training_params.steps');
  });

  it("never derives the built-in trainer's token from URL_SIGNING_SECRET: the token anyone could compute leases nothing", async () => {
    const secret = gw.env.config.URL_SIGNING_SECRET ?? 'atelier-dev-insecure-url-signing-secret';
    const derived = 'trn_' + createHmac('sha256', secret).update('atelier builtin trainer v1').digest('base64url');
    const res = await lease(derived);
    expect(res.status).toBe(401);
    // The built-in trainer is there, with a token of its own, listed as built in.
    const listed = await api<{ trainers: { name: string; builtin: boolean }[] }>('GET', '/api/admin/trainers', gw.adminToken);
    expect(listed.body.trainers.filter((t) => t.builtin).map((t) => t.name)).toContain('atelier-builtin');
  });

  it("fetches a dataset's image links under the media rules: an internal address is never asked, the run fails naming the row; a stalled link holds one run, not the others", async () => {
    let internalHits = 0;
    const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#00aaaa' } }).png().toBuffer();
    const internal = createServer((_req, res) => {
      internalHits++;
      res.writeHead(200, { 'content-type': 'image/png' }).end(png);
    });
    await new Promise<void>((r) => internal.listen(0, '127.0.0.1', r));
    try {
      const linked = async (t: Tenant, file: string, link: string) => {
        const links = parquet([
          { name: 'caption', data: Array.from({ length: 3 }, (_, i) => `picture ${i}`), type: 'STRING' },
          { name: 'image', data: Array.from({ length: 3 }, () => link), type: 'STRING' },
        ]);
        expect((await uploadFiles(gw.http, t.apiKey, `${t.namespace}/ds`, 'main', [{ field: 'files[]', filename: file, content: links }])).status).toBe(201);
        const created = await api<{ fine_tune: FineTune }>('POST', fineTunes(t), t.apiKey, {
          base_model: 'atelier/local-image',
          script_type: 'image_generation',
          resource: `main/${file}`,
          training_params: { caption_column: 'caption', image_column: 'image', steps: 3 },
        });
        expect(created.status).toBe(201);
        expect((await api('POST', `${fineTunes(t)}/${created.body.fine_tune.id}/actions/run`, t.apiKey)).status).toBe(200);
        return created.body.fine_tune.id;
      };
      const jo = await newTenant();
      const internalRun = await linked(jo, 'internal.parquet', `http://127.0.0.1:${(internal.address() as AddressInfo).port}/metadata.png`);
      const failed = await until(jo, internalRun, 'errored');
      expect(failed.error).toMatch(/^The trainer failed: row 1: the image link in column image could not be fetched: /);
      expect(internalHits).toBe(0);

      // One tenant's link never answers; another tenant's run still trains to the end meanwhile.
      const kim = await newTenant();
      const stalledRun = await linked(kim, 'stalled.parquet', receiverUrl.replace('/hooks', '/stall'));
      await waitFor(() => stalled.length > 0, { timeoutMs: 20_000, description: 'the built-in trainer to ask the stalled link' });
      const lee = await newTenant();
      const ft = await tokenized(lee, 'atelier/local-chat', { epochs: 1 });
      await api('POST', `${fineTunes(lee)}/${ft.id}/actions/run`, lee.apiKey);
      await until(lee, ft.id, 'completed', 30_000);
      expect((await get(kim, stalledRun)).status).toBe('running');
    } finally {
      await new Promise((r) => internal.close(r));
    }
  }, 90_000);

  it("lists fine-tunes across a user's and an org's repositories, with the hub's filters", async () => {
    const carol = await newTenant();
    const a = await tokenized(carol, 'Qwen/Qwen3-0.6B');
    const b = await tokenized(carol, 'Qwen/Qwen3-1.7B');
    await api('POST', `${fineTunes(carol)}/${b.id}/actions/run`, carol.apiKey);
    type Page = { fine_tunes: { id: string; status: string; repo_name: string }[]; total: number; page: number; page_size: number };
    const all = await api<Page>('GET', '/api/user/fine_tunes', carol.apiKey);
    expect(all.body).toMatchObject({ total: 2, page: 1, page_size: 20 });
    expect(all.body.fine_tunes.map((f) => f.id)).toEqual([b.id, a.id]);
    expect((await api<Page>('GET', '/api/user/fine_tunes?status=enqueued', carol.apiKey)).body.fine_tunes.map((f) => f.id)).toEqual([b.id]);
    expect((await api<Page>('GET', '/api/user/fine_tunes?sort=created_at&page_size=1&page=2', carol.apiKey)).body.fine_tunes.map((f) => f.id)).toEqual([b.id]);
    expect((await api<Page>('GET', `/api/user/fine_tunes?created_by=${carol.username}&search=DS`, carol.apiKey)).body.total).toBe(2);
    expect((await api<Page>('GET', '/api/user/fine_tunes?created_by=nobody-at-all', carol.apiKey)).body.total).toBe(0);
    expect((await api('GET', '/api/user/fine_tunes?sort=size', carol.apiKey)).status).toBe(400);

    const org = `org-${carol.username}`;
    expect((await api('POST', '/api/admin/orgs', gw.adminToken, { name: org, credits: '5' })).status).toBe(201);
    expect((await api('PUT', `/api/admin/orgs/${org}/members/${carol.username}`, gw.adminToken)).status).toBe(200);
    expect((await api('POST', '/api/repos', carol.apiKey, { namespace: org, name: 'ds' })).status).toBe(201);
    expect((await uploadFiles(gw.http, carol.apiKey, `${org}/ds`, 'main', [{ field: 'files[]', filename: 'qa.parquet', content: DATASET }])).status).toBe(201);
    const orgFt = await api<{ fine_tune: FineTune }>('POST', `/api/repos/${org}/ds/fine_tunes`, carol.apiKey, {
      base_model: 'Qwen/Qwen3-0.6B', script_type: 'text_generation', resource: 'main/qa.parquet', training_params: { question_column: 'question', answer_column: 'answer' },
    });
    const ofOrg = await api<Page>('GET', `/api/orgs/${org}/fine_tunes`, carol.apiKey);
    expect(ofOrg.body.fine_tunes.map((f) => f.id)).toEqual([orgFt.body.fine_tune.id]);
    expect((await api('GET', `/api/orgs/${org}/fine_tunes`, alice.apiKey)).status).toBe(403);
    expect((await api('GET', `/api/orgs/${carol.namespace}/fine_tunes`, carol.apiKey)).status).toBe(404);
  }, 60_000);

  it('publishes an event whose publisher died after the transition committed (the outbox), once', async () => {
    const ft = await tokenized(alice, 'Qwen/Qwen3-0.6B');
    const prisma = gw.app.get(PrismaService);
    // What a process that died between commit and publication leaves: a recorded, unpublished event.
    const stranded = await prisma.fineTuneEvent.create({
      data: { fineTuneId: ft.id, userId: (await prisma.fineTune.findUniqueOrThrow({ where: { id: ft.id } })).createdById, data: { id: ft.id, status: 'tokenized', marker: 'stranded' }, createdAt: new Date(Date.now() - 60_000) },
    });
    const events = new AbortController();
    const seen: string[] = [];
    const stream = fetch(`${url}/api/events`, { headers: { authorization: `Bearer ${alice.apiKey}` }, signal: events.signal }).then(async (res) => {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) seen.push(new TextDecoder().decode(chunk));
    }).catch(() => undefined);
    await waitFor(async () => (await prisma.fineTuneEvent.findUniqueOrThrow({ where: { id: stranded.id } })).publishedAt !== null, { timeoutMs: 15_000, description: 'the sweeper to publish the stranded event' });
    await waitFor(() => seen.join('').includes('"marker":"stranded"'), { timeoutMs: 5_000, description: 'the stranded event on the stream' });
    events.abort();
    await stream;
    expect(seen.join('').match(/"marker":"stranded"/g)).toHaveLength(1);
  }, 30_000);

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
