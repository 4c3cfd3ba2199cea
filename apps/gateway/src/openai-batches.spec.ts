import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { toFile } from 'openai';
import { batchUuid } from '@atelier/batch';
import { Prisma, PrismaService } from '@atelier/db';
import { MediaServiceModule } from '@atelier/media';
import { createService, JobQueues } from '@atelier/runtime';
import { BATCH_LINE_QUEUE } from '@atelier/contracts';
import { createTenant, waitFor, type Tenant, openAiError } from '@atelier/testing';
import { startBatchWorker } from './batch.harness';
import { startChatStack, type ChatStack } from './chat.harness';

type Line = { custom_id: string; method?: string; url?: string; body: Record<string, unknown> };
const chatLine = (customId: string, content: string, extra: Record<string, unknown> = {}, model = 'remote-echo'): Line => ({
  custom_id: customId,
  method: 'POST',
  url: '/v1/chat/completions',
  body: { model, messages: [{ role: 'user', content }], max_tokens: 20, ...extra },
});
const jsonl = (lines: unknown[]) => lines.map((l) => JSON.stringify(l)).join('\n') + '\n';

interface CompletionBody {
  usage: { prompt_tokens: number; completion_tokens: number };
  [field: string]: unknown;
}
interface OutputLine {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: CompletionBody } | null;
  error: { code: string; message: string } | null;
}

/** A line's price at the batch rate: remote-echo's token prices (0.00001 in, 0.00003 out), half off, rounded up to six places. */
const batchPrice = (input: number, output: number) => new Prisma.Decimal(input).times('0.00001').plus(new Prisma.Decimal(output).times('0.00003')).times(0.5).toDecimalPlaces(6, Prisma.Decimal.ROUND_UP);

/**
 * OpenAI's Batch API through the official SDK: a listening gateway, the chat service and a
 * queue-worker running the batch pool, in-process on one database and Redis prefix, against the
 * fake upstream.
 */
describe('batches (POST/GET /api/ai/batches, cancel)', () => {
  let stack: ChatStack;
  let worker: NestFastifyApplication;
  let media: NestFastifyApplication;
  let owner: Tenant;
  let other: Tenant;
  const client = (t: Tenant | string) => stack.client(typeof t === 'string' ? t : t.apiKey);
  const balance = async (t: Tenant) => (await stack.gw.http.request<{ credits: string; reserved: string; available: string }>('GET', '/api/credits', { token: t.apiKey })).body;

  const upload = async (t: Tenant | string, lines: unknown[]) => (await client(t).files.create({ file: await toFile(Buffer.from(jsonl(lines)), 'input.jsonl'), purpose: 'batch' })).id;
  const settled = (t: Tenant | string, id: string, statuses = ['completed', 'failed', 'expired', 'cancelled'], timeoutMs = 30_000) =>
    waitFor(
      async () => {
        const b = await client(t).batches.retrieve(id);
        return statuses.includes(b.status) ? b : undefined;
      },
      { timeoutMs, intervalMs: 100, description: `batch ${id} to reach ${statuses.join('/')}` },
    );
  const outputLines = async (t: Tenant, fileId: string | null | undefined): Promise<OutputLine[]> => {
    if (!fileId) return [];
    const text = await (await client(t).files.content(fileId)).text();
    return text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as OutputLine);
  };

  beforeAll(async () => {
    stack = await startChatStack({ BATCH_WORKER_CONCURRENCY: '2', BATCH_SWEEP_INTERVAL_MS: '200' });
    worker = await startBatchWorker(stack);
    media = await createService(MediaServiceModule.forRoot(stack.gw.env.config), stack.gw.env.config, { service: 'media' });
    owner = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    other = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
  }, 60_000);
  afterAll(async () => {
    await worker?.close();
    await media?.close();
    await stack?.close();
  });

  it('runs a batch to completed: the output matched by custom_id, counts and usage live, each line charged once at half price', async () => {
    const before = await balance(owner);
    const lines = Array.from({ length: 6 }, (_, i) => chatLine(`req-${i}`, `question number ${i}`));
    const input = await upload(owner, lines);
    const made = await client(owner).batches.create({ input_file_id: input, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { run: 'nightly' } });
    expect(made).toMatchObject({ id: expect.stringMatching(/^batch_[0-9a-f]{32}$/), object: 'batch', status: 'validating', input_file_id: input, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { run: 'nightly' } });
    expect(made.expires_at! - made.created_at).toBe(24 * 3600);

    const done = await settled(owner, made.id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: 6, completed: 6, failed: 0 }, error_file_id: null });
    expect(done.in_progress_at).toEqual(expect.any(Number));
    expect(done.finalizing_at).toEqual(expect.any(Number));
    expect(done.completed_at).toEqual(expect.any(Number));

    const out = await outputLines(owner, done.output_file_id);
    expect(out.map((l) => l.custom_id).sort()).toEqual(lines.map((l) => l.custom_id).sort());
    for (const line of out) {
      const i = Number(line.custom_id.slice(4));
      expect(line).toMatchObject({ id: expect.stringMatching(/^batch_req_/), error: null, response: { status_code: 200, request_id: expect.any(String) } });
      expect(line.response!.body).toMatchObject({ object: 'chat.completion', model: 'remote-echo', choices: [{ message: { role: 'assistant', content: `Echo: question number ${i}` } }] });
    }
    // The output file is the namespace's own file, kept like an upload.
    expect(await client(owner).files.retrieve(done.output_file_id!)).toMatchObject({ purpose: 'batch_output', filename: `${made.id}_output.jsonl` });

    // Usage is the lines' own, and the money is each line's tokens at half price, nothing held back.
    const input_tokens = out.reduce((n, l) => n + l.response!.body.usage.prompt_tokens, 0);
    const output_tokens = out.reduce((n, l) => n + l.response!.body.usage.completion_tokens, 0);
    expect(done.usage).toMatchObject({ input_tokens, output_tokens, total_tokens: input_tokens + output_tokens });
    const expected = out.reduce((sum, l) => sum.plus(batchPrice(l.response!.body.usage.prompt_tokens, l.response!.body.usage.completion_tokens)), new Prisma.Decimal(0));
    const after = await balance(owner);
    expect(new Prisma.Decimal(before.credits).minus(after.credits).toFixed()).toBe(expected.toFixed());
    expect(after.reserved).toBe(before.reserved);
    // The usage rows say batch.
    const usage = await stack.gw.http.request<{ rows: { group: string; requests: number; cost: string }[] }>('GET', '/api/usage?group_by=endpoint', { token: owner.apiKey });
    expect(usage.body.rows.find((r) => r.group === '/api/ai/batches')).toMatchObject({ requests: 6, cost: expected.toFixed() });

    // Listed newest first with a cursor.
    const second = await client(owner).batches.create({ input_file_id: input, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const page = await client(owner).batches.list({ limit: 1 });
    expect(page.data.map((b) => b.id)).toEqual([second.id]);
    expect(page.hasNextPage()).toBe(true);
    expect((await page.getNextPage()).data.map((b) => b.id)).toEqual([made.id]);
    await settled(owner, second.id);
  });

  it('runs embeddings, Responses and image lines, each answered as its route answers and charged at half price', async () => {
    const run = async (endpoint: '/v1/embeddings' | '/v1/responses' | '/v1/images/generations', lines: Line[]) => {
      const batch = await client(owner).batches.create({ input_file_id: await upload(owner, lines), endpoint, completion_window: '24h' });
      const done = await settled(owner, batch.id);
      expect(done).toMatchObject({ status: 'completed', request_counts: { total: lines.length, completed: lines.length, failed: 0 } });
      return new Map((await outputLines(owner, done.output_file_id)).map((l) => [l.custom_id, l.response!.body as Record<string, unknown>]));
    };

    const embedded = await run('/v1/embeddings', [
      { custom_id: 'e1', method: 'POST', url: '/v1/embeddings', body: { model: 'remote-embed', input: ['first text', 'second text'] } },
      { custom_id: 'e2', method: 'POST', url: '/embeddings', body: { model: 'remote-embed', input: 'first text' } },
    ]);
    const e1 = embedded.get('e1') as { object: string; data: { index: number; embedding: number[] }[]; usage: { prompt_tokens: number } };
    expect(e1).toMatchObject({ object: 'list', model: 'remote-embed' });
    expect(e1.data.map((d) => d.embedding.length)).toEqual([8, 8]);
    // The same text, the same vector: the lines ran the model, not a placeholder.
    expect((embedded.get('e2') as typeof e1).data[0].embedding).toEqual(e1.data[0].embedding);

    const responded = await run('/v1/responses', [{ custom_id: 'r1', method: 'POST', url: '/v1/responses', body: { model: 'remote-echo', input: 'say something', max_output_tokens: 30 } }]);
    expect(responded.get('r1')).toMatchObject({ object: 'response', status: 'completed', output: [{ type: 'message', content: [{ type: 'output_text', text: 'Echo: say something' }] }] });

    const before = await balance(owner);
    const drawn = await run('/v1/images/generations', [{ custom_id: 'i1', method: 'POST', url: '/v1/images/generations', body: { model: 'local-image', prompt: 'a lighthouse', size: '64x64' } }]);
    const image = (drawn.get('i1') as { data: { b64_json: string }[] }).data[0];
    // A real PNG of the asked size, made by the media service.
    const png = Buffer.from(image.b64_json, 'base64');
    expect(png.subarray(1, 4).toString()).toBe('PNG');
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([64, 64]);
    // local-image is 0.01 an image: half of it.
    const after = await balance(owner);
    expect(new Prisma.Decimal(before.credits).minus(after.credits).toFixed()).toBe('0.005');
  });

  it("tells every status change to the owner's event stream as batch.status and to the batch's webhook, signed", async () => {
    const received: { headers: http.IncomingHttpHeaders; body: string }[] = [];
    const receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const events = new AbortController();
    let text = '';
    const res = await fetch(`${stack.base}/api/events`, { headers: { authorization: `Bearer ${owner.apiKey}` }, signal: events.signal });
    const stream = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) text += decoder.decode(chunk, { stream: true });
    })().catch(() => undefined);
    try {
      const webhook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
      const batch = await client(owner).batches.create({ input_file_id: await upload(owner, [chatLine('a', 'x'), chatLine('b', 'y')]), endpoint: '/v1/chat/completions', completion_window: '24h', webhook } as never);
      await settled(owner, batch.id);
      const statuses = () =>
        [...text.matchAll(/event: batch\.status\ndata: (.*)\nid: \S+\n/g)].map((m) => JSON.parse(m[1]) as { id: string; status: string; request_counts: { total: number } }).filter((d) => d.id === batch.id);
      await waitFor(() => statuses().some((d) => d.status === 'completed'), { timeoutMs: 10_000, description: 'the completed event' });
      expect(statuses().map((d) => d.status)).toEqual(['in_progress', 'finalizing', 'completed']);
      // Written with the lines: the in_progress event already counts them.
      expect(statuses()[0].request_counts.total).toBe(2);

      const secret = (await stack.gw.http.request<{ key: string }>('GET', '/api/webhooks/default/secret', { token: owner.apiKey })).body.key;
      const messages = await waitFor(() => (received.length >= 3 ? received : undefined), { timeoutMs: 20_000, description: 'three webhook messages' });
      const parsed = messages.map((m) => JSON.parse(m.body) as { type: string; data: { id: string; status: string } });
      expect(parsed.map((m) => [m.type, m.data.id, m.data.status]).sort()).toEqual([
        ['batch.status', batch.id, 'completed'],
        ['batch.status', batch.id, 'finalizing'],
        ['batch.status', batch.id, 'in_progress'],
      ]);
      for (const m of messages) {
        const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
        const expected = `v1,${createHmac('sha256', key).update(`${m.headers['webhook-id']}.${m.headers['webhook-timestamp']}.${m.body}`).digest('base64')}`;
        expect(m.headers['webhook-signature']).toBe(expected);
      }
      expect(await openAiError(client(owner).batches.create({ input_file_id: batch.input_file_id, endpoint: '/v1/chat/completions', completion_window: '24h', webhook: 'ftp://example.com/x' } as never))).toEqual({
        status: 400,
        message: 'webhook must be an absolute http(s) URL',
      });
    } finally {
      events.abort();
      await stream;
      await new Promise((r) => receiver.close(r));
    }
  });

  it("fails a bad line on its own (the error file has the route's 400) and a bad file as a whole (errors.data by line)", async () => {
    const input = await upload(owner, [chatLine('good', 'fine'), chatLine('bad', 'too long', { max_tokens: 10_000_000 }), chatLine('also-good', 'fine too')]);
    const batch = await client(owner).batches.create({ input_file_id: input, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const done = await settled(owner, batch.id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: 3, completed: 2, failed: 1 } });
    expect((await outputLines(owner, done.output_file_id)).map((l) => l.custom_id).sort()).toEqual(['also-good', 'good']);
    const errors = await outputLines(owner, done.error_file_id);
    expect(errors).toEqual([expect.objectContaining({ custom_id: 'bad', response: expect.objectContaining({ status_code: 400, body: expect.objectContaining({ error: expect.objectContaining({ type: 'invalid_request' }) }) }) })]);

    const badFile = await upload(owner, [chatLine('x', 'a'), chatLine('x', 'b'), { ...chatLine('y', 'c'), url: '/v1/embeddings' }, chatLine('z', 'd', {}, 'no-such-model')]);
    const failed = await settled(owner, (await client(owner).batches.create({ input_file_id: badFile, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    expect(failed.status).toBe('failed');
    expect(failed.failed_at).toEqual(expect.any(Number));
    expect(failed.errors!.data!.map((e) => [e.line, e.code])).toEqual([
      [2, 'duplicate_custom_id'],
      [3, 'mismatched_endpoint'],
      [4, 'model_not_found'],
    ]);
    expect(failed.request_counts).toEqual({ total: 0, completed: 0, failed: 0 });
  });

  it("fails a batch whose estimate is more than the key's budget, reserving and charging nothing", async () => {
    const made = await stack.gw.http.request<{ api_key: string }>('POST', '/api/api_keys', { token: owner.apiKey, body: { name: 'small-budget', budget: { max_spend: '0.001', period: 'total' } } });
    expect(made.status).toBe(201);
    const before = await balance(owner);
    // 40 lines of up to 20 completion tokens: some 0.014 credits at the batch price, past the key's 0.001.
    const input = await upload(made.body.api_key, Array.from({ length: 40 }, (_, i) => chatLine(`b${i}`, 'a question of some length')));
    const batch = await settled(made.body.api_key, (await client(made.body.api_key).batches.create({ input_file_id: input, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    expect(batch.status).toBe('failed');
    expect(batch.errors!.data![0]).toMatchObject({ code: 'budget_exceeded', message: expect.stringContaining('Budget exceeded for key') });
    expect(await balance(owner)).toEqual(before);
  });

  it('cancels mid-run: lines not started are dropped uncharged, running ones finish and are kept and charged', async () => {
    const before = await balance(owner);
    const lines = Array.from({ length: 12 }, (_, i) => chatLine(`slow-${i}`, `line ${i}`, {}, 'remote-delay'));
    const batch = await client(owner).batches.create({ input_file_id: await upload(owner, lines), endpoint: '/v1/chat/completions', completion_window: '24h' });
    await waitFor(async () => (await client(owner).batches.retrieve(batch.id)).request_counts!.completed >= 2, { timeoutMs: 20_000, description: 'two lines done' });
    const cancelling = await client(owner).batches.cancel(batch.id);
    expect(['cancelling', 'cancelled']).toContain(cancelling.status);
    expect(cancelling.cancelling_at).toEqual(expect.any(Number));
    const done = await settled(owner, batch.id, ['cancelled']);
    const out = await outputLines(owner, done.output_file_id);
    const errors = await outputLines(owner, done.error_file_id);
    expect(done.request_counts).toEqual({ total: 12, completed: out.length, failed: errors.length });
    expect(out.length).toBeGreaterThanOrEqual(2);
    expect(out.length).toBeLessThan(12);
    expect(new Set([...out, ...errors].map((l) => l.custom_id)).size).toBe(12);
    for (const e of errors) expect(e).toMatchObject({ response: null, error: { code: 'batch_cancelled' } });
    // Charged for what ran, and nothing is left reserved.
    const expected = out.reduce((sum, l) => sum.plus(batchPrice(l.response!.body.usage.prompt_tokens, l.response!.body.usage.completion_tokens)), new Prisma.Decimal(0));
    const after = await balance(owner);
    expect(new Prisma.Decimal(before.credits).minus(after.credits).toFixed()).toBe(expected.toFixed());
    expect(after.reserved).toBe(before.reserved);
    // An ended batch cannot be cancelled again; a second cancel of a cancelled one answers as it is.
    expect((await client(owner).batches.cancel(batch.id)).status).toBe('cancelled');
    const completed = await settled(owner, (await client(owner).batches.create({ input_file_id: await upload(owner, [chatLine('one', 'x')]), endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    expect(await openAiError(client(owner).batches.cancel(completed.id))).toEqual({ status: 409, message: `Batch ${completed.id} cannot be cancelled: it is completed` });
  });

  it('expires a batch past its window: finished lines kept and charged, the rest batch_expired and released', async () => {
    const before = await balance(owner);
    const lines = Array.from({ length: 12 }, (_, i) => chatLine(`late-${i}`, `line ${i}`, {}, 'remote-delay'));
    const batch = await client(owner).batches.create({ input_file_id: await upload(owner, lines), endpoint: '/v1/chat/completions', completion_window: '24h' });
    await waitFor(async () => (await client(owner).batches.retrieve(batch.id)).request_counts!.completed >= 2, { timeoutMs: 20_000, description: 'two lines done' });
    // The 24 h window, passed (the sweep runs every 200 ms here).
    await stack.gw.app.get(PrismaService).batch.update({ where: { id: batchUuid(batch.id)! }, data: { expiresAt: new Date(Date.now() - 1000) } });
    const done = await settled(owner, batch.id, ['expired']);
    expect(done.expired_at).toEqual(expect.any(Number));
    const out = await outputLines(owner, done.output_file_id);
    const errors = await outputLines(owner, done.error_file_id);
    expect(out.length).toBeGreaterThanOrEqual(2);
    expect(out.length + errors.length).toBe(12);
    expect(errors.length).toBeGreaterThan(0);
    for (const e of errors) expect(e).toMatchObject({ response: null, error: { code: 'batch_expired' } });
    const expected = out.reduce((sum, l) => sum.plus(batchPrice(l.response!.body.usage.prompt_tokens, l.response!.body.usage.completion_tokens)), new Prisma.Decimal(0));
    const after = await balance(owner);
    expect(new Prisma.Decimal(before.credits).minus(after.credits).toFixed()).toBe(expected.toFixed());
    expect(after.reserved).toBe(before.reserved);
  });

  it('queues again the lines whose jobs Redis lost, once the batch stands still, and answers each once', async () => {
    const lines = Array.from({ length: 10 }, (_, i) => chatLine(`lost-${i}`, `line ${i}`, {}, 'remote-delay'));
    const batch = await client(owner).batches.create({ input_file_id: await upload(owner, lines), endpoint: '/v1/chat/completions', completion_window: '24h' });
    await waitFor(async () => (await client(owner).batches.retrieve(batch.id)).request_counts!.completed >= 2, { timeoutMs: 20_000, description: 'two lines done' });
    // The waiting lines' jobs vanish (a Redis that lost its data); the rows still say pending.
    await worker.get(JobQueues).queue(BATCH_LINE_QUEUE).drain();
    const done = await settled(owner, batch.id, ['completed'], 30_000);
    expect(done.request_counts).toEqual({ total: 10, completed: 10, failed: 0 });
    expect((await outputLines(owner, done.output_file_id)).map((l) => l.custom_id).sort()).toEqual(lines.map((l) => l.custom_id).sort());
  });

  it("keeps each namespace's batches its own: another cannot read, list, cancel, or run one from the owner's file", async () => {
    const input = await upload(owner, [chatLine('mine', 'hello')]);
    const mine = await client(owner).batches.create({ input_file_id: input, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { name: 'shared-name' } });
    const stranger = client(other);
    expect(await openAiError(stranger.batches.retrieve(mine.id))).toEqual({ status: 404, message: `No such Batch object: ${mine.id}` });
    expect(await openAiError(stranger.batches.cancel(mine.id))).toEqual({ status: 404, message: `No such Batch object: ${mine.id}` });
    expect((await stranger.batches.list()).data.map((b) => b.id)).not.toContain(mine.id);
    expect(await openAiError(stranger.batches.create({ input_file_id: input, endpoint: '/v1/chat/completions', completion_window: '24h' }))).toEqual({ status: 400, message: `input_file_id: no file '${input}'` });
    // The same metadata in another namespace is another batch; the owner's runs untouched.
    const theirs = await stranger.batches.create({ input_file_id: await upload(other, [chatLine('theirs', 'hi')]), endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { name: 'shared-name' } });
    expect(theirs.id).not.toBe(mine.id);
    expect((await settled(owner, mine.id)).status).toBe('completed');
    expect(await openAiError(stranger.files.content((await client(owner).batches.retrieve(mine.id)).output_file_id!))).toMatchObject({ status: 404 });
    expect((await settled(other, theirs.id)).request_counts).toEqual({ total: 1, completed: 1, failed: 0 });
    // A key without the batches scope cannot use batches at all.
    const scoped = await stack.gw.http.request<{ api_key: string }>('POST', '/api/api_keys', { token: owner.apiKey, body: { name: 'chat-only', scopes: ['chat'] } });
    expect(await openAiError(client(scoped.body.api_key).batches.list())).toMatchObject({ status: 403 });
  });

  it('creates one batch for a retried create with the same Idempotency-Key', async () => {
    const input = await upload(owner, [chatLine('once', 'only once')]);
    const body = { input_file_id: input, endpoint: '/v1/chat/completions' as const, completion_window: '24h' as const };
    const first = await client(owner).batches.create(body, { headers: { 'Idempotency-Key': 'batch-retry-1' } });
    const again = await client(owner).batches.create(body, { headers: { 'Idempotency-Key': 'batch-retry-1' } });
    expect(again.id).toBe(first.id);
    expect(await openAiError(client(owner).batches.create({ ...body, metadata: { other: 'body' } }, { headers: { 'Idempotency-Key': 'batch-retry-1' } }))).toMatchObject({ status: 422 });
    expect((await settled(owner, first.id)).request_counts).toEqual({ total: 1, completed: 1, failed: 0 });
  });

  it('refuses bad requests with clear 400s and unknown ids with 404s', async () => {
    const input = await upload(owner, [chatLine('a', 'b')]);
    const create = (body: Record<string, unknown>) => openAiError(client(owner).batches.create({ input_file_id: input, endpoint: '/v1/chat/completions', completion_window: '24h', ...body } as never));
    expect(await create({ completion_window: '1h' })).toEqual({ status: 400, message: "completion_window must be '24h'" });
    expect(await create({ endpoint: '/v1/moderations' })).toMatchObject({ status: 400, message: expect.stringContaining('endpoint must be one of /v1/chat/completions') });
    expect(await create({ input_file_id: 'file-nope' })).toEqual({ status: 400, message: "input_file_id: no file 'file-nope'" });
    expect(await create({ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) })).toEqual({ status: 400, message: 'metadata may hold at most 16 pairs' });
    const userData = (await client(owner).files.create({ file: await toFile(Buffer.from(jsonl([chatLine('a', 'b')])), 'data.jsonl'), purpose: 'user_data' })).id;
    expect(await create({ input_file_id: userData })).toMatchObject({ status: 400, message: expect.stringContaining("must be uploaded with purpose 'batch'") });
    expect(await openAiError(client(owner).batches.retrieve('batch_0123'))).toEqual({ status: 404, message: 'No such Batch object: batch_0123' });
    expect(await openAiError(client(owner).batches.list({ limit: 0 }))).toMatchObject({ status: 400 });
  });
});

