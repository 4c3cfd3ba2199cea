import OpenAI from 'openai';
import { parquetReadObjects } from 'hyparquet';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { PrismaService } from '@atelier/db';
import { FineTuneServiceModule } from '@atelier/fine-tune';
import { createService } from '@atelier/runtime';
import { createTenant, waitFor, type Tenant, openAiError } from '@atelier/testing';
import { StoredCompletionsSweeper } from '@atelier/chat';
import { startChatStack, type ChatStack } from './chat.harness';

/**
 * Stored completions (OpenAI's Stored Completions API) and feedback, through the official SDK:
 * what store: true keeps, how it is listed, read, re-labelled and deleted, what privacy settings
 * refuse, and that no namespace sees or judges another's.
 */
describe('stored completions and feedback (GET/POST/DELETE /api/ai/chat/completions, /api/ai/feedback, /api/feedback_metrics)', () => {
  let stack: ChatStack;
  let fineTunes: NestFastifyApplication;
  let owner: Tenant;
  let other: Tenant;
  const client = (t: Tenant) => stack.client(t.apiKey);
  const http = (t: Tenant, method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, body?: unknown) => stack.gw.http.request<Record<string, unknown>>(method, url, { token: t.apiKey, body });
  const ask = (t: Tenant, content: string, extra: Record<string, unknown> = {}) =>
    client(t).chat.completions.create({ model: 'remote-echo', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content }], ...extra } as OpenAI.ChatCompletionCreateParamsNonStreaming);
  const all = async (t: Tenant, query: Record<string, unknown> = {}) => {
    const ids: string[] = [];
    for await (const c of client(t).chat.completions.list({ limit: 2, ...query })) ids.push(c.id);
    return ids;
  };

  beforeAll(async () => {
    stack = await startChatStack({ STORED_COMPLETIONS_MAX_PER_NAMESPACE: '6' });
    fineTunes = await createService(FineTuneServiceModule.forRoot(stack.gw.env.config), stack.gw.env.config, { service: 'fine-tune' });
    owner = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    other = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
  });
  afterAll(async () => {
    await fineTunes?.close();
    await stack?.close();
  });

  it('keeps a completion asked with store: true, with its messages and metadata, and never tells the provider to store it', async () => {
    const before = stack.upstream.requests.length;
    const made = await ask(owner, 'remember me', { store: true, metadata: { topic: 'greeting', run: 'a' }, temperature: 0.2 });
    const sent = stack.upstream.requests.slice(before).at(-1)!.body;
    expect(sent).not.toHaveProperty('store');
    expect(sent).not.toHaveProperty('metadata');
    expect(sent.temperature).toBe(0.2);

    const stored = await client(owner).chat.completions.retrieve(made.id);
    expect(stored).toMatchObject({ id: made.id, object: 'chat.completion', model: 'remote-echo', metadata: { topic: 'greeting', run: 'a' }, feedback: [] });
    expect(stored.choices[0].message.content).toBe(made.choices[0].message.content);
    expect(stored.usage).toEqual(made.usage);

    const messages = await client(owner).chat.completions.messages.list(made.id);
    expect(messages.data.map((m) => [m.role, m.content])).toEqual([
      ['system', 'Be brief.'],
      ['user', 'remember me'],
    ]);
    expect(messages.data[0].id).toBe(`${made.id}-0`);
    const last = await client(owner).chat.completions.messages.list(made.id, { order: 'desc', limit: 1 });
    expect(last.data.map((m) => m.content)).toEqual(['remember me']);
    expect(last.has_more).toBe(true);

    // Without store: true nothing is kept.
    const plain = await ask(owner, 'forget me');
    expect((await openAiError(client(owner).chat.completions.retrieve(plain.id))).status).toBe(404);
  });

  it('keeps a streamed answer whole, as the non-streamed object it would have been', async () => {
    const stream = await client(owner).chat.completions.create({ model: 'remote-echo', messages: [{ role: 'user', content: 'stream me please' }], stream: true, store: true });
    let text = '';
    let id = '';
    for await (const chunk of stream) {
      id = chunk.id;
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    const stored = await client(owner).chat.completions.retrieve(id);
    expect(stored.object).toBe('chat.completion');
    expect(stored.choices[0].message).toMatchObject({ role: 'assistant', content: text });
    expect(stored.choices[0].finish_reason).toBe('stop');
    expect(stored.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it('lists by model and metadata, pages with after, orders both ways, updates metadata and deletes', async () => {
    const tenant = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    const made: string[] = [];
    for (const [i, run] of ['x', 'y', 'x'].entries()) made.push((await ask(tenant, `line ${i}`, { store: true, metadata: { run } })).id);
    await ask(tenant, 'other model', { store: true, model: 'remote-quick' });
    expect((await all(tenant, { model: 'remote-echo' }))).toEqual(made);
    expect(await all(tenant, { model: 'remote-echo', order: 'desc' })).toEqual([...made].reverse());
    expect(await all(tenant, { metadata: { run: 'x' } })).toEqual([made[0], made[2]]);
    expect((await all(tenant)).length).toBe(4);

    const updated = await client(tenant).chat.completions.update(made[1], { metadata: { run: 'x', reviewed: 'yes' } });
    expect(updated.metadata).toEqual({ run: 'x', reviewed: 'yes' });
    expect(await all(tenant, { metadata: { run: 'x' } })).toEqual(made);

    expect(await client(tenant).chat.completions.delete(made[0])).toEqual({ id: made[0], object: 'chat.completion.deleted', deleted: true });
    expect((await openAiError(client(tenant).chat.completions.retrieve(made[0]))).status).toBe(404);
    expect((await openAiError(client(tenant).chat.completions.delete(made[0]))).status).toBe(404);
    expect(await all(tenant, { model: 'remote-echo' })).toEqual(made.slice(1));
  });

  it('refuses malformed store fields and list parameters with 400s naming the field, and stores nothing', async () => {
    const tooMany = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
    const cases: [Record<string, unknown>, string][] = [
      [{ store: 'yes' }, 'store must be a boolean'],
      [{ store: true, metadata: tooMany }, 'metadata may hold at most 16 pairs'],
      [{ store: true, metadata: { k: 5 } }, 'metadata values must be strings'],
      [{ store: true, metadata: { k: 'x'.repeat(513) } }, 'metadata values must be at most 512 characters'],
    ];
    const tenant = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    for (const [extra, message] of cases) {
      const res = await http(tenant, 'POST', '/api/ai/chat/completions', { model: 'remote-echo', messages: [{ role: 'user', content: 'hi' }], ...extra });
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.body)).toContain(message);
    }
    expect((await http(tenant, 'GET', '/api/ai/chat/completions?limit=0')).status).toBe(400);
    expect((await http(tenant, 'GET', '/api/ai/chat/completions?order=sideways')).status).toBe(400);
    expect((await http(tenant, 'GET', '/api/ai/chat/completions?after=chatcmpl-nope')).status).toBe(400);
    expect((await http(tenant, 'GET', '/api/ai/chat/completions?min_value=1')).status).toBe(400);
    const made = await ask(tenant, 'kept', { store: true });
    const update = await http(tenant, 'POST', `/api/ai/chat/completions/${made.id}`, { metadata: { a: 'b' }, model: 'x' });
    expect(update.status).toBe(400);
    expect(JSON.stringify(update.body)).toContain('unknown field(s): model');
    expect((await http(tenant, 'POST', `/api/ai/chat/completions/${made.id}`, {})).status).toBe(400);
    expect(await all(tenant)).toEqual([made.id]);
  });

  it('stores a share of traffic by the namespace capture_rate; store: false and a key that refuses storing always win', async () => {
    const tenant = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    const limits = await stack.gw.http.request('PUT', `/api/admin/namespaces/${tenant.namespace}/limits`, { token: stack.gw.adminToken, body: { capture_rate: 1 } });
    expect(limits.status).toBe(200);
    expect((limits.body as { limits: { capture_rate: number } }).limits.capture_rate).toBe(1);
    const captured = await ask(tenant, 'captured');
    const refused = await ask(tenant, 'not this one', { store: false });
    const privateKey = await http(tenant, 'POST', '/api/api_keys', { name: 'private', store: false });
    expect(privateKey.status).toBe(201);
    expect(privateKey.body.store).toBe(false);
    const fromPrivate = await stack.client(privateKey.body.api_key as string).chat.completions.create({ model: 'remote-echo', messages: [{ role: 'user', content: 'private' }], store: true });
    // A key made with the private key is private too.
    const child = await stack.gw.http.request<Record<string, unknown>>('POST', '/api/api_keys', { token: privateKey.body.api_key as string, body: { name: 'child' } });
    expect(child.body.store).toBe(false);
    expect(await all(tenant)).toEqual([captured.id]);
    expect(refused.id).not.toBe(captured.id);
    expect(fromPrivate.id).toBeDefined();
    expect((await http(tenant, 'POST', '/api/api_keys', { name: 'bad', store: 'no' })).status).toBe(400);
    const badRate = await stack.gw.http.request('PUT', `/api/admin/namespaces/${tenant.namespace}/limits`, { token: stack.gw.adminToken, body: { capture_rate: 2 } });
    expect(badRate.status).toBe(400);
  });

  it('takes feedback on declared metrics, lists it with the completion, and filters on it', async () => {
    const tenant = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    expect((await http(tenant, 'POST', '/api/feedback_metrics', { name: 'good', type: 'boolean', optimize: 'max' })).status).toBe(201);
    const score = await http(tenant, 'POST', '/api/feedback_metrics', { name: 'score', type: 'float', optimize: 'max' });
    expect(score.body).toMatchObject({ object: 'feedback_metric', name: 'score', type: 'float', optimize: 'max', namespace: tenant.namespace });
    expect((await http(tenant, 'POST', '/api/feedback_metrics', { name: 'good', type: 'float', optimize: 'min' })).status).toBe(409);
    expect((await http(tenant, 'POST', '/api/feedback_metrics', { name: 'Bad Name', type: 'boolean', optimize: 'max' })).status).toBe(400);
    expect((await http(tenant, 'POST', '/api/feedback_metrics', { name: 'x', type: 'int', optimize: 'max' })).status).toBe(400);
    expect(((await http(tenant, 'GET', '/api/feedback_metrics')).body.data as { name: string }[]).map((m) => m.name)).toEqual(['good', 'score']);

    const a = await ask(tenant, 'answer a', { store: true });
    const b = await ask(tenant, 'answer b', { store: true });
    const given = await http(tenant, 'POST', '/api/ai/feedback', { target_id: a.id, metric: 'good', value: true, comment: 'spot on' });
    expect(given.status).toBe(200);
    expect(given.body).toMatchObject({ object: 'feedback', target_id: a.id, metric: 'good', value: 1, comment: 'spot on' });
    expect((await http(tenant, 'POST', '/api/ai/feedback', { target_id: b.id, metric: 'good', value: false })).status).toBe(200);
    expect((await http(tenant, 'POST', '/api/ai/feedback', { target_id: b.id, metric: 'score', value: 0.25 })).status).toBe(200);

    const bad: [Record<string, unknown>, number, string][] = [
      [{ target_id: a.id, metric: 'good', value: 0.5 }, 400, "value must be true or false: 'good' is a boolean metric"],
      [{ target_id: a.id, metric: 'score', value: true }, 400, "value must be a number: 'score' is a float metric"],
      [{ target_id: a.id, metric: 'unknown', value: true }, 400, "no feedback metric 'unknown'"],
      [{ target_id: 'chatcmpl-doesnotexist', metric: 'good', value: true }, 404, 'No chat completion found'],
      [{ target_id: 'not-an-id', metric: 'good', value: true }, 400, 'target_id must be'],
      [{ target_id: a.id, metric: 'good' }, 400, 'value must be'],
    ];
    for (const [body, status, message] of bad) {
      const res = await http(tenant, 'POST', '/api/ai/feedback', body);
      expect([res.status, JSON.stringify(res.body)]).toEqual([status, expect.stringContaining(message)]);
    }

    const stored = await client(tenant).chat.completions.retrieve(a.id);
    expect((stored as unknown as { feedback: unknown[] }).feedback).toEqual([expect.objectContaining({ metric: 'good', value: 1, comment: 'spot on' })]);
    expect(await all(tenant, { metric: 'good', min_value: 1 } as Record<string, unknown>)).toEqual([a.id]);
    expect(await all(tenant, { metric: 'good' } as Record<string, unknown>)).toEqual([a.id, b.id]);
    expect(await all(tenant, { metric: 'score', min_value: 0.5 } as Record<string, unknown>)).toEqual([]);
    expect((await http(tenant, 'GET', '/api/ai/chat/completions?metric=nope')).status).toBe(400);

    // A stored response takes feedback too, listed by target.
    const response = await client(tenant).responses.create({ model: 'remote-echo', input: 'judge me' });
    expect((await http(tenant, 'POST', '/api/ai/feedback', { target_id: response.id, metric: 'score', value: 0.9 })).status).toBe(200);
    const onResponse = await http(tenant, 'GET', `/api/ai/feedback?target_id=${response.id}`);
    expect((onResponse.body.data as { value: number }[]).map((f) => f.value)).toEqual([0.9]);

    // Deleting the completion deletes its feedback.
    await client(tenant).chat.completions.delete(a.id);
    expect(await all(tenant, { metric: 'good' } as Record<string, unknown>)).toEqual([b.id]);
  });

  it("keeps each namespace's completions, metrics and feedback its own", async () => {
    const mine = await ask(owner, 'private to the owner', { store: true, metadata: { team: 'shared-name' } });
    const theirs = await ask(other, 'the other namespace', { store: true, metadata: { team: 'shared-name' } });
    // Read, list, messages, update, delete: all 404 (or absent) for the other namespace.
    expect((await openAiError(client(other).chat.completions.retrieve(mine.id))).status).toBe(404);
    expect((await openAiError(client(other).chat.completions.messages.list(mine.id))).status).toBe(404);
    expect((await openAiError(client(other).chat.completions.update(mine.id, { metadata: { team: 'hijacked' } }))).status).toBe(404);
    expect((await openAiError(client(other).chat.completions.delete(mine.id))).status).toBe(404);
    expect(await all(other, { metadata: { team: 'shared-name' } })).toEqual([theirs.id]);
    expect(await all(owner, { metadata: { team: 'shared-name' } })).toEqual([mine.id]);
    expect((await client(owner).chat.completions.retrieve(mine.id)).metadata).toEqual({ team: 'shared-name' });
    // Listing another namespace by name is refused.
    expect((await http(other, 'GET', `/api/ai/chat/completions?namespace=${owner.namespace}`)).status).toBe(403);
    // Metrics of the same name live side by side; neither may judge the other's completion.
    expect((await http(owner, 'POST', '/api/feedback_metrics', { name: 'helpful', type: 'boolean', optimize: 'max' })).status).toBe(201);
    expect((await http(other, 'POST', '/api/feedback_metrics', { name: 'helpful', type: 'float', optimize: 'min' })).status).toBe(201);
    expect((await http(other, 'POST', '/api/ai/feedback', { target_id: mine.id, metric: 'helpful', value: 1 })).status).toBe(404);
    expect((await http(other, 'GET', `/api/ai/feedback?target_id=${mine.id}`)).status).toBe(404);
    expect((await http(other, 'GET', `/api/feedback_metrics?namespace=${owner.namespace}`)).status).toBe(403);
    expect((await http(owner, 'POST', '/api/ai/feedback', { target_id: mine.id, metric: 'helpful', value: true })).status).toBe(200);
    expect((await client(owner).chat.completions.retrieve(mine.id) as unknown as { feedback: { value: number }[] }).feedback.map((f) => f.value)).toEqual([1]);
  });

  it('exports the completions judged good as a Parquet dataset that a text_chat_messages fine-tune tokenizes unchanged', async () => {
    const tenant = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    expect((await http(tenant, 'POST', '/api/repos', { namespace: tenant.namespace, name: 'loop' })).status).toBe(201);
    expect((await http(tenant, 'POST', '/api/feedback_metrics', { name: 'good', type: 'boolean', optimize: 'max' })).status).toBe(201);
    const answers: OpenAI.ChatCompletion[] = [];
    for (let i = 0; i < 6; i++) {
      const answer = await ask(tenant, `question number ${i}`, { store: true, metadata: { source: 'support' } });
      answers.push(answer);
      expect((await http(tenant, 'POST', '/api/ai/feedback', { target_id: answer.id, metric: 'good', value: i % 3 !== 0 })).status).toBe(200);
    }
    const good = answers.filter((_, i) => i % 3 !== 0);
    const body = { filter: { metric: 'good', min_value: 1, metadata: { source: 'support' } }, namespace: tenant.namespace, repo: 'loop', path: 'data/good.parquet' };
    const exported = await http(tenant, 'POST', '/api/ai/chat/completions/export', body);
    expect(exported.status).toBe(200);
    expect(exported.body).toMatchObject({ object: 'chat.completion.export', rows: 4, skipped: 0, path: 'data/good.parquet', commit: { message: expect.stringContaining('Export 4 stored completions') } });
    expect((exported.body.commit as { message: string }).message).toContain('"metric":"good"');

    const file = await fetch(`${stack.base}/api/repos/${tenant.namespace}/loop/file/main/data/good.parquet`, { headers: { authorization: `Bearer ${tenant.apiKey}` } });
    expect(file.status).toBe(200);
    const rows = (await parquetReadObjects({ file: await file.arrayBuffer() })) as { messages: string; completion_id: string; model: string }[];
    expect(rows.map((r) => r.completion_id)).toEqual(good.map((a) => a.id));
    expect(JSON.parse(rows[0].messages)).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'question number 1' },
      { role: 'assistant', content: good[0].choices[0].message.content },
    ]);

    const base = `/api/repos/${tenant.namespace}/loop/fine_tunes`;
    const created = await http(tenant, 'POST', base, { resource: 'main/data/good.parquet', base_model: 'Qwen/Qwen3-1.7B', script_type: 'text_chat_messages', training_params: { messages_column: 'messages' } });
    expect(created.status).toBe(201);
    const id = (created.body.fine_tune as { id: string }).id;
    expect((await http(tenant, 'POST', `${base}/${id}/tokenize`)).status).toBe(200);
    const done = await waitFor(
      async () => {
        const ft = (await http(tenant, 'GET', `${base}/${id}`)).body.fine_tune as { status: string; tokenization: Record<string, unknown> };
        return ft.status !== 'tokenizing' && ft;
      },
      { timeoutMs: 20_000, description: 'the fine-tune to be tokenized' },
    );
    expect(done.status).toBe('tokenized');
    expect(done.tokenization).toMatchObject({ rows: 4, valid_rows: 4, invalid_rows: 0 });
  });

  it('refuses exports it cannot do with clear 4xx, and writes nothing', async () => {
    const tenant = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    expect((await http(tenant, 'POST', '/api/repos', { namespace: tenant.namespace, name: 'mine' })).status).toBe(201);
    await ask(tenant, 'something', { store: true });
    const body = { namespace: tenant.namespace, repo: 'mine', path: 'x.parquet' };
    const cases: [Tenant | string, Record<string, unknown>, number, string][] = [
      [other, body, 403, ''],
      [tenant, { ...body, repo: 'nope' }, 404, ''],
      [tenant, { ...body, path: 'x.csv' }, 400, 'path must name a .parquet file'],
      [tenant, { ...body, filter: { model: 'never-used' } }, 400, 'No stored completion'],
      [tenant, { ...body, filter: { metric: 'unknown' } }, 400, "no feedback metric 'unknown'"],
      [tenant, { ...body, filter: { min_value: 1 } }, 400, 'filter.min_value needs filter.metric'],
      [tenant, { ...body, extra: 1 }, 400, 'unknown field(s): extra'],
    ];
    for (const [who, payload, status, message] of cases) {
      const res = typeof who === 'string' ? await stack.gw.http.request('POST', '/api/ai/chat/completions/export', { token: who, body: payload }) : await http(who, 'POST', '/api/ai/chat/completions/export', payload);
      expect([res.status, JSON.stringify(res.body)]).toEqual([status, expect.stringContaining(message)]);
    }
    // A key limited to chat may not write a repo.
    const chatOnly = await http(tenant, 'POST', '/api/api_keys', { name: 'chat only', scopes: ['chat'] });
    const refused = await stack.gw.http.request('POST', '/api/ai/chat/completions/export', { token: chatOnly.body.api_key as string, body });
    expect(refused.status).toBe(403);
    expect(JSON.stringify(refused.body)).toContain("'repos' scope");
    const repo = await http(tenant, 'GET', `/api/repos/${tenant.namespace}/mine`);
    expect(JSON.stringify(repo.body)).not.toContain('x.parquet');
  });

  it('queues an export asked for in the background, with its progress, an export.status event when done, and no other namespace seeing it', async () => {
    const tenant = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    expect((await http(tenant, 'POST', '/api/repos', { namespace: tenant.namespace, name: 'bg' })).status).toBe(201);
    for (let i = 0; i < 3; i++) await ask(tenant, `background ${i}`, { store: true, metadata: { lot: 'bg' } });
    const events = new AbortController();
    let text = '';
    const res = await fetch(`${stack.base}/api/events`, { headers: { authorization: `Bearer ${tenant.apiKey}` }, signal: events.signal });
    const reading = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) text += decoder.decode(chunk, { stream: true });
    })().catch(() => undefined);
    try {
      const queued = await http(tenant, 'POST', '/api/ai/chat/completions/export', { filter: { metadata: { lot: 'bg' } }, namespace: tenant.namespace, repo: 'bg', path: 'bg.parquet', background: true });
      expect(queued.status).toBe(202);
      expect(queued.body).toMatchObject({ object: 'chat.completion.export', status: 'queued', progress: { rows: 0, total: 3 } });
      const id = queued.body.id as string;
      expect(id).toMatch(/^export_[0-9a-f]{32}$/);
      const done = await waitFor(
        async () => {
          const got = (await http(tenant, 'GET', `/api/ai/chat/completions/exports/${id}`)).body;
          return got.status === 'completed' && got;
        },
        { timeoutMs: 20_000, description: 'the queued export to complete' },
      );
      expect(done).toMatchObject({ rows: 3, skipped: 0, progress: { rows: 3, total: 3 }, commit: { message: expect.stringContaining('Export 3 stored completions') } });
      const event = await waitFor(() => [...text.matchAll(/event: export\.status\ndata: (.*)\nid: \S+\n/g)].map((m) => JSON.parse(m[1]) as { id: string; status: string }).find((d) => d.id === id), {
        timeoutMs: 10_000,
        description: 'the export.status event',
      });
      expect(event.status).toBe('completed');
      const file = await fetch(`${stack.base}/api/repos/${tenant.namespace}/bg/file/main/bg.parquet`, { headers: { authorization: `Bearer ${tenant.apiKey}` } });
      expect(((await parquetReadObjects({ file: await file.arrayBuffer() })) as unknown[]).length).toBe(3);
      // Another namespace cannot read it; a malformed id is a 404 too.
      expect((await http(other, 'GET', `/api/ai/chat/completions/exports/${id}`)).status).toBe(404);
      expect((await http(tenant, 'GET', '/api/ai/chat/completions/exports/export_nope')).status).toBe(404);
    } finally {
      events.abort();
      await reading;
    }
  });

  it('queues an export of more completions than a request may write, and writes every one', async () => {
    const tenant = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    expect((await http(tenant, 'POST', '/api/repos', { namespace: tenant.namespace, name: 'big' })).status).toBe(201);
    const prisma = stack.gw.app.get(PrismaService);
    const [who] = await prisma.$queryRaw<{ ns: string; uid: string }[]>`SELECT id::text AS ns, user_id::text AS uid FROM namespaces WHERE name = ${tenant.namespace}`;
    // 10,001 stored completions, one past what a request exports, written straight to the table.
    await prisma.$executeRaw`
      INSERT INTO stored_completions (id, namespace_id, user_id, model, messages, request, completion, expires_at)
      SELECT 'chatcmpl-bulk' || lpad(g::text, 6, '0'), ${who.ns}::uuid, ${who.uid}::uuid, 'remote-echo',
             jsonb_build_array(jsonb_build_object('role', 'user', 'content', 'question ' || g)), '{}'::jsonb,
             jsonb_build_object('choices', jsonb_build_array(jsonb_build_object('message', jsonb_build_object('role', 'assistant', 'content', 'answer ' || g)))),
             now() + interval '1 day'
        FROM generate_series(1, 10001) g`;
    const queued = await http(tenant, 'POST', '/api/ai/chat/completions/export', { namespace: tenant.namespace, repo: 'big', path: 'all.parquet' });
    expect(queued.status).toBe(202);
    const id = queued.body.id as string;
    const done = await waitFor(
      async () => {
        const got = (await http(tenant, 'GET', `/api/ai/chat/completions/exports/${id}`)).body;
        return (got.status === 'completed' || got.status === 'failed') && got;
      },
      { timeoutMs: 60_000, description: 'the large export to end' },
    );
    expect(done).toMatchObject({ status: 'completed', rows: 10001, progress: { total: 10001 } });
    const file = await fetch(`${stack.base}/api/repos/${tenant.namespace}/big/file/main/all.parquet`, { headers: { authorization: `Bearer ${tenant.apiKey}` } });
    const rows = (await parquetReadObjects({ file: await file.arrayBuffer() })) as { messages: string; completion_id: string }[];
    expect(rows.length).toBe(10001);
    expect(rows[10000].completion_id).toBe('chatcmpl-bulk010001');
    expect(JSON.parse(rows[0].messages)).toEqual([
      { role: 'user', content: 'question 1' },
      { role: 'assistant', content: 'answer 1' },
    ]);
  });

  // Last: the sweep trims every namespace past the cap of this suite (6).
  it('forgets completions past their time at once, and the sweep deletes them and trims a namespace to its cap', async () => {
    const tenant = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    const made: string[] = [];
    for (let i = 0; i < 8; i++) made.push((await ask(tenant, `keep ${i}`, { store: true })).id);
    const prisma = stack.gw.app.get(PrismaService);
    await prisma.storedCompletion.update({ where: { id: made[7] }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect((await openAiError(client(tenant).chat.completions.retrieve(made[7]))).status).toBe(404);
    const swept = await stack.gw.app.get(StoredCompletionsSweeper).sweep();
    expect(swept.expired).toBeGreaterThanOrEqual(1);
    expect(await all(tenant)).toEqual(made.slice(1, 7));
    expect(await prisma.storedCompletion.count({ where: { id: { in: made } } })).toBe(6);
  });
});
