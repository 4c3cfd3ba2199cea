import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { defaultCatalogDir } from '@atelier/models';
import {
  buildAppsForTest,
  createTestEnvironment,
  freePort,
  startAppProcess,
  startFakeOpenAiUpstream,
  uniqueName,
  waitFor,
  type AppProcess,
  type FakeOpenAiUpstream,
  type TestEnvironment,
} from '@atelier/testing';

/** One span as the OTLP/HTTP JSON export carries it, with its attributes flattened and its service. */
interface ExportedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  events: { name: string; attributes: Record<string, unknown> }[];
  status: { code?: number };
}

type OtlpValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean; arrayValue?: { values: OtlpValue[] } };
const valueOf = (v: OtlpValue): unknown =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.doubleValue ?? v.boolValue ?? v.arrayValue?.values.map(valueOf);
const attributesOf = (list: { key: string; value: OtlpValue }[] = []) => Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

/** A real OTLP/HTTP receiver (JSON), as a collector would be: it keeps every span it is sent. */
async function startOtlpReceiver(): Promise<{ url: string; spans: ExportedSpan[]; bodies: string[]; close(): Promise<void> }> {
  const spans: ExportedSpan[] = [];
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (raw += c));
    req.on('end', () => {
      bodies.push(raw);
      if (req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) return void res.writeHead(415).end();
      const body = JSON.parse(raw) as {
        resourceSpans: { resource: { attributes: { key: string; value: OtlpValue }[] }; scopeSpans: { spans: Record<string, unknown>[] }[] }[];
      };
      for (const rs of body.resourceSpans) {
        const service = String(attributesOf(rs.resource.attributes)['service.name']);
        for (const ss of rs.scopeSpans)
          for (const s of ss.spans)
            spans.push({
              service,
              traceId: s.traceId as string,
              spanId: s.spanId as string,
              parentSpanId: (s.parentSpanId as string | undefined) ?? '',
              name: s.name as string,
              kind: s.kind as number,
              attributes: attributesOf(s.attributes as { key: string; value: OtlpValue }[]),
              links: ((s.links as { traceId: string; spanId: string }[] | undefined) ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
              events: ((s.events as { name: string; attributes?: { key: string; value: OtlpValue }[] }[] | undefined) ?? []).map((e) => ({ name: e.name, attributes: attributesOf(e.attributes) })),
              status: (s.status as { code?: number }) ?? {},
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    bodies,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const UPSTREAM_KEY_ENV = 'ATELIER_TRACING_UPSTREAM_KEY';
const UPSTREAM_KEY = 'sk-tracing-upstream-secret-0123456789';

describe('OpenTelemetry traces across the services (real processes, a real OTLP receiver)', () => {
  let env: TestEnvironment;
  let build: ReturnType<typeof buildAppsForTest>;
  let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
  let upstream: FakeOpenAiUpstream;
  let catalogDir: string;
  const spawned: ChildProcess[] = [];
  let gateway: AppProcess;
  let base: string;
  let apiKey: string;

  beforeAll(async () => {
    env = await createTestEnvironment();
    receiver = await startOtlpReceiver();
    upstream = await startFakeOpenAiUpstream({ apiKey: UPSTREAM_KEY, apiKeyEnv: UPSTREAM_KEY_ENV });
    catalogDir = fs.mkdtempSync(path.join(os.tmpdir(), 'atelier-tracing-catalog-'));
    for (const file of fs.readdirSync(defaultCatalogDir())) fs.copyFileSync(path.join(defaultCatalogDir(), file), path.join(catalogDir, file));
    fs.writeFileSync(
      path.join(catalogDir, 'traced-remote.json'),
      JSON.stringify({
        id: 'traced-remote',
        created: 1767225600,
        owned_by: 'test',
        display_name: 'traced-remote',
        description: 'The fake upstream (echo)',
        endpoint: '/chat/completions',
        capabilities: { input: ['text'], output: ['text'] },
        pricing: { method: 'token', input_cost_per_token: '0.00001', output_cost_per_token: '0.00003' },
        context_window: 8192,
        default_max_tokens: 64,
        features: { tools: true, json_mode: true, streaming: true },
        engine: { type: 'openai-compatible', base_url: upstream.url, upstream_model: 'echo', api_key_env: UPSTREAM_KEY_ENV },
        parameters: { type: 'object', properties: {} },
      }),
    );
    build = buildAppsForTest(['gateway', 'chat', 'queue-worker']);
    const traced = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', MODEL_CATALOG_DIR: catalogDir, [UPSTREAM_KEY_ENV]: UPSTREAM_KEY };
    [gateway] = await Promise.all([
      startAppProcess(build, env, 'gateway', 'PORT', traced, (c) => spawned.push(c)),
      startAppProcess(build, env, 'chat', 'CHAT_PORT', traced, (c) => spawned.push(c)),
      startAppProcess(build, env, 'queue-worker', 'QUEUE_WORKER_PORT', traced, (c) => spawned.push(c)),
    ]);
    base = `http://127.0.0.1:${gateway.port}`;
    const created = await fetch(`${base}/api/admin/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.config.ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: uniqueName(), credits: '5' }),
    });
    apiKey = ((await created.json()) as { api_key: string }).api_key;
  }, 180_000);
  afterAll(async () => {
    for (const c of spawned) if (c.exitCode === null) c.kill('SIGKILL');
    build?.cleanup();
    await upstream?.close();
    await receiver?.close();
    if (catalogDir) fs.rmSync(catalogDir, { recursive: true, force: true });
    await env?.cleanup();
  });

  it('makes one trace of a chat completion: the gateway, the chat service, the upstream call with its traceparent, GenAI attributes, no secret', async () => {
    const clientTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const res = await fetch(`${base}/api/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', traceparent: `00-${clientTrace}-00f067aa0ba902b7-01` },
      body: JSON.stringify({ model: 'traced-remote', messages: [{ role: 'user', content: 'trace me' }], max_tokens: 20, temperature: 0.5 }),
    });
    expect(res.status).toBe(200);
    // The caller's trace continues, and the answer says where to find it.
    expect(res.headers.get('traceparent')).toMatch(new RegExp(`^00-${clientTrace}-[0-9a-f]{16}-01$`));
    const ofTrace = () => receiver.spans.filter((s) => s.traceId === clientTrace);
    await waitFor(() => ofTrace().some((s) => s.service === 'chat' && s.name === 'chat traced-remote') && ofTrace().some((s) => s.service === 'gateway' && s.kind === 2), {
      timeoutMs: 15_000,
      description: 'the spans of both services to be exported',
    });
    const spans = ofTrace();
    const server = spans.find((s) => s.service === 'gateway' && s.name === 'POST /api/ai/chat/completions')!;
    expect(server).toBeDefined();
    expect(server.parentSpanId).toBe('00f067aa0ba902b7');
    expect(server.attributes).toMatchObject({ 'http.response.status_code': 200, 'atelier.cost': expect.any(String), 'gen_ai.usage.input_tokens': 21, 'gen_ai.usage.output_tokens': 9 });
    // The gateway's stages, as the stage histogram names them, marked on the request's span with their durations.
    const stages = new Map(server.events.map((e) => [e.name, e.attributes['atelier.stage.duration_ms']]));
    // The settle runs after the answer went out; the span, which ends at the response's time, waits for it.
    for (const stage of ['auth', 'chat.validate', 'chat.rpc', 'chat.deliver', 'chat.settle']) expect({ stage, ms: stages.get(stage) }).toEqual({ stage, ms: expect.any(Number) });
    // The Redis hop: the chat service's span is a child of the gateway's request.
    const consumer = spans.find((s) => s.service === 'chat' && s.name === 'chat-completion process')!;
    expect(consumer.parentSpanId).toBe(server.spanId);
    const model = spans.find((s) => s.service === 'chat' && s.name === 'chat traced-remote')!;
    expect(model.parentSpanId).toBe(consumer.spanId);
    expect(model.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'traced-remote',
      'gen_ai.response.model': 'traced-remote',
      'gen_ai.request.max_tokens': 20,
      'gen_ai.request.temperature': 0.5,
      'gen_ai.usage.input_tokens': 21,
      'gen_ai.usage.output_tokens': 9,
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.provider.name': 'openai-compatible',
    });
    // Prompts and completions are not recorded unless asked for.
    expect(model.attributes['gen_ai.input.messages']).toBeUndefined();
    expect(model.events.map((e) => e.name)).toContain('chat.provider');
    // The upstream request carried a traceparent of the same trace, from the model span.
    const sent = upstream.requests.find((r) => JSON.stringify(r.body).includes('trace me'))!;
    expect(sent.traceparent).toMatch(new RegExp(`^00-${clientTrace}-${model.spanId}-01$`));
    // No secret anywhere in what was exported: the API key, the upstream's key, the admin token.
    const exported = receiver.bodies.join('\n');
    for (const secret of [apiKey, UPSTREAM_KEY, env.config.ADMIN_TOKEN!]) expect(exported.includes(secret)).toBe(false);
    // Log lines carry the trace.
    // (The services log at warn here; the JSON logger's mixin is covered by its own spec.)
  });

  it("neither lets a caller's traceparent flag decide sampling nor forwards its tracestate to the upstream", async () => {
    const clientTrace = '5cf92f3577b34da6a3ce929d0e0e4737';
    const res = await fetch(`${base}/api/ai/chat/completions`, {
      method: 'POST',
      // Flag 00: "not sampled". A caller could otherwise switch tracing off for its own requests (or force it on with 01).
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', traceparent: `00-${clientTrace}-00f067aa0ba902b8-00`, tracestate: 'vendor=caller-secret' },
      body: JSON.stringify({ model: 'traced-remote', messages: [{ role: 'user', content: 'trace me not' }], max_tokens: 20 }),
    });
    expect(res.status).toBe(200);
    await waitFor(() => receiver.spans.some((s) => s.traceId === clientTrace && s.service === 'gateway'), { timeoutMs: 15_000, description: 'the request to be traced all the same' });
    const sent = upstream.requests.find((r) => JSON.stringify(r.body).includes('trace me not'))!;
    expect(sent.traceparent).toMatch(new RegExp(`^00-${clientTrace}-[0-9a-f]{16}-01$`));
    expect(sent.tracestate).toBeUndefined();
  });

  it("links an enqueued generation's processing and its completion event to the request that created it", async () => {
    const res = await fetch(`${base}/api/ai/queue`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'local-image', prompt: 'a traced lighthouse', width: 64, height: 64 }),
    });
    expect(res.status).toBe(200);
    const requestTrace = res.headers.get('traceparent')!.split('-')[1];
    const worker = await waitFor(
      () => receiver.spans.find((s) => s.service === 'queue-worker' && s.name === 'generation-image process' && s.links.some((l) => l.traceId === requestTrace)),
      { timeoutMs: 30_000, description: "the worker's span, linked to the enqueue" },
    );
    const publish = await waitFor(() => receiver.spans.find((s) => s.name === 'events.generation-completed publish' && s.traceId === worker.traceId), {
      timeoutMs: 15_000,
      description: 'the completion event published in the worker span',
    });
    expect(publish.kind).toBe(4); // PRODUCER
  });

  it('changes no answer when the collector is dead, and counts what it dropped', async () => {
    const dead = await freePort();
    const lonely = await startAppProcess(build, env, 'gateway', 'PORT', { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${dead}`, MODEL_CATALOG_DIR: catalogDir }, (c) => spawned.push(c));
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`http://127.0.0.1:${lonely.port}/api/ai/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'traced-remote', messages: [{ role: 'user', content: `dead collector ${i}` }], max_tokens: 5 }),
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { choices: { message: { content: string } }[] }).choices[0].message.content).toBe(`Echo: dead collector ${i}`);
    }
    const dropped = await waitFor(
      async () => {
        const text = await (await fetch(`http://127.0.0.1:${lonely.port}/metrics`)).text();
        const m = /atelier_trace_spans_dropped_total\{[^}]*reason="export_failed"[^}]*\} (\d+)/.exec(text);
        return m && Number(m[1]) > 0 ? Number(m[1]) : undefined;
      },
      { timeoutMs: 20_000, description: 'the failed export to be counted' },
    );
    expect(dropped).toBeGreaterThan(0);
    lonely.child.kill('SIGTERM');
  });
});
