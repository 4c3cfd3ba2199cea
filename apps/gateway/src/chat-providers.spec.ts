import OpenAI from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { createPrismaClient, type PrismaClient } from '@atelier/db';
import { chatUsageRows, createTenant, metricValue, sseEvents, sseJson, waitFor, type Tenant, openAiError } from '@atelier/testing';
import { FAKE_UPSTREAM_KEY, startChatStack, type ChatStack } from './chat.harness';

const IN_PRICE = 0.00001; // prices of the test's remote models
const OUT_PRICE = 0.00003;

describe('openai-compatible provider against a fake upstream server (through the gateway)', () => {
  let stack: ChatStack;
  let user: Tenant;
  let client: OpenAI;
  let prisma: PrismaClient;
  const ask = (content: string) => [{ role: 'user' as const, content }];
  const upstreamCalls = (model: string) => stack.upstream.requests.filter((r) => r.model === model);
  const balance = async (t: Tenant) => (await stack.gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: t.apiKey })).body;

  beforeAll(async () => {
    stack = await startChatStack();
    user = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
    client = stack.client(user.apiKey);
    prisma = createPrismaClient(stack.gw.env.databaseUrl, 2);
  });
  afterAll(async () => {
    await prisma?.$disconnect();
    await stack?.close();
  });

  it('passes a completion through: upstream model name, API key from the environment, our model name back, upstream usage billed', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const res = await stack.client(payer.apiKey).chat.completions.create({ model: 'remote-echo', messages: ask('hello upstream'), max_tokens: 50, temperature: 0.3, user: 'u-1' });
    expect(res).toMatchObject({
      id: expect.stringMatching(/^chatcmpl-/),
      object: 'chat.completion',
      model: 'remote-echo',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Echo: hello upstream' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 21, completion_tokens: 9, total_tokens: 30 },
    });
    const sent = upstreamCalls('echo').at(-1)!;
    expect(sent.authorization).toBe(`Bearer ${FAKE_UPSTREAM_KEY}`);
    expect(sent.body).toMatchObject({ model: 'echo', stream: false, max_tokens: 50, temperature: 0.3, user: 'u-1', messages: ask('hello upstream') });
    await waitFor(async () => (await balance(payer)).reserved === '0', { description: 'the charge to be settled' });
    expect(await balance(payer)).toMatchObject({ credits: String(Number((1 - (21 * IN_PRICE + 9 * OUT_PRICE)).toFixed(6))), reserved: '0' });
    const row = await waitFor(() => chatUsageRows(prisma, { id: res.id }).then((r) => r[0]));
    expect(row).toMatchObject({ provider: expect.stringMatching(/^openai-compatible:echo@127\.0\.0\.1:\d+$/), promptTokens: 21, completionTokens: 9, status: 'succeeded' });
  });

  it('passes a stream through chunk by chunk, ending with the upstream usage and [DONE]', async () => {
    const chunks: ChatCompletionChunk[] = [];
    for await (const c of await client.chat.completions.create({ model: 'remote-echo', messages: ask('one two three'), stream: true })) chunks.push(c);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Echo: one two three');
    // role chunk, one chunk per word, the finish chunk and the usage chunk: nothing merged or buffered
    expect(chunks).toHaveLength(1 + 4 + 1 + 1);
    for (const c of chunks) expect(c.model).toBe('remote-echo');
    expect(chunks.at(-1)!.usage).toEqual({ prompt_tokens: 21, completion_tokens: 9, total_tokens: 30 });
    expect(upstreamCalls('echo').at(-1)!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });

  it('counts tokens locally when the upstream reports no usage (streamed and not)', async () => {
    const plain = await client.chat.completions.create({ model: 'remote-no-usage', messages: ask('count me') });
    expect(plain.usage!.completion_tokens).toBeGreaterThan(0);
    expect(plain.usage!.total_tokens).toBe(plain.usage!.prompt_tokens + plain.usage!.completion_tokens);
    const chunks: ChatCompletionChunk[] = [];
    for await (const c of await client.chat.completions.create({ model: 'remote-no-usage', messages: ask('count me'), stream: true })) chunks.push(c);
    expect(chunks.at(-1)!.usage).toEqual(plain.usage);
  });

  it('passes tool calls through', async () => {
    const res = await client.chat.completions.create({
      model: 'remote-tool',
      messages: ask('call it'),
      tools: [{ type: 'function', function: { name: 'ping', parameters: { type: 'object', properties: {} } } }],
    });
    expect(res.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: null, tool_calls: [{ id: 'call_up_1', index: 0, type: 'function', function: { name: 'ping', arguments: '{}' } }] } });
  });

  it('retries 5xx answers with backoff before the first byte', async () => {
    const res = await client.chat.completions.create({ model: 'remote-flaky', messages: ask('try again') });
    expect(res.choices[0].message.content).toBe('Echo: try again');
    expect(upstreamCalls('flaky-2')).toHaveLength(3);
  });

  it('retries 429 answers', async () => {
    const res = await client.chat.completions.create({ model: 'remote-rate-limited', messages: ask('patience') });
    expect(res.choices[0].message.content).toBe('Echo: patience');
    expect(upstreamCalls('rate-limited-1')).toHaveLength(2);
  });

  it('falls back to the next listed provider when one keeps failing', async () => {
    const before = upstreamCalls('down').length;
    const res = await client.chat.completions.create({ model: 'remote-fallback', messages: ask('anyone there?'), stream: true });
    let text = '';
    for await (const c of res) text += c.choices[0]?.delta.content ?? '';
    expect(text).toBe('Echo: anyone there?');
    expect(upstreamCalls('down').length - before).toBe(2); // first try + 1 retry, then the fallback
  });

  it('skips a provider whose API key is not configured', async () => {
    const res = await client.chat.completions.create({ model: 'remote-bad-key', messages: ask('keyless') });
    expect(res.choices[0].message.content).toBe('Echo: keyless');
  });

  it('answers 502 when every provider fails, 400 with the reason when the upstream rejects the request, 504 on timeouts; nothing charged', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const c = stack.client(payer.apiKey);
    const down = await openAiError(c.chat.completions.create({ model: 'remote-all-down', messages: ask('x') }));
    expect(down).toEqual({ status: 502, message: 'The model provider failed with HTTP 500: upstream exploded' });
    const rejected = await openAiError(c.chat.completions.create({ model: 'remote-reject', messages: ask('x') }));
    expect(rejected).toEqual({ status: 400, message: 'The model provider rejected the request: This model does not support that parameter' });
    const hang = await openAiError(c.chat.completions.create({ model: 'remote-hang', messages: ask('x'), stream: true }));
    expect(hang.status).toBe(504);
    expect(hang.message).toMatch(/did not answer within 300 ms/);
    expect(await balance(payer)).toMatchObject({ credits: '1', reserved: '0' });
  });

  it("records a failed request whose provider's error text holds a NUL (kept as U+FFFD), with a request answered beside it", async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const c = stack.client(payer.apiKey);
    const [failed, answered] = await Promise.all([
      c.chat.completions.create({ model: 'remote-down-nul', messages: ask('x') }).then(
        () => undefined,
        (err: unknown) => err,
      ),
      c.chat.completions.create({ model: 'remote-echo', messages: ask('beside it') }),
    ]);
    expect(failed).toBeInstanceOf(OpenAI.APIError);
    expect((failed as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    const rows = await waitFor(async () => {
      const found = await chatUsageRows(prisma, { namespace: payer.namespace });
      return found.length === 2 ? found.sort((a, b) => a.status.localeCompare(b.status)) : undefined;
    }, { description: 'both usage rows' });
    expect(rows.map((r) => [r.status, r.errorMessage])).toEqual([
      ['failed', 'The model provider failed with HTTP 500: upstream\uFFFDexploded'],
      ['succeeded', null],
    ]);
    expect(rows[1].id).toBe(answered.id);
  });

  it('ends a stream cut midway with an error event and no [DONE], billing only what was delivered', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const received: string[] = [];
    const failure = await openAiError(
      (async () => {
        for await (const c of await stack.client(payer.apiKey).chat.completions.create({ model: 'remote-cut', messages: ask('cut me'), stream: true }))
          received.push(c.choices[0]?.delta.content ?? '');
      })(),
    );
    expect(received.join('')).toBe('Echo: partial');
    expect(failure.message).toMatch(/stream/);
    expect(upstreamCalls('cut')).toHaveLength(1); // no retry once bytes went out

    const res = await fetch(`${stack.base}/api/ai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${payer.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'remote-error-stream', messages: ask('fail me'), stream: true }),
    });
    const events = sseEvents(await res.text());
    expect(res.status).toBe(200);
    expect(events.map((e) => e.data)).not.toContain('[DONE]');
    const last = JSON.parse(events.at(-1)!.data);
    expect(last).toMatchObject({ status: 'error', error: { type: 'upstream_error', message: expect.stringContaining('upstream worker crashed') } });

    // Two failed streams, each billed for its prompt (local count) and the 2-3 tokens delivered.
    await waitFor(async () => (await balance(payer)).reserved === '0');
    const rows = await waitFor(async () => {
      const found = await chatUsageRows(prisma, { namespace: payer.namespace });
      return found.length === 2 ? found : undefined;
    }, { description: 'both usage records' });
    expect(rows.map((r) => r.status)).toEqual(['failed', 'failed']);
    const charged = rows.reduce((sum, r) => sum + Number(r.cost), 0);
    expect(charged).toBeGreaterThan(0);
    expect(Number((await balance(payer)).credits)).toBeCloseTo(1 - charged, 6);
    for (const r of rows) expect(r.completionTokens).toBeGreaterThan(0);
  });

  it('aborts the upstream call when the client disconnects mid-stream', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const controller = new AbortController();
    const stream = await stack.client(payer.apiKey).chat.completions.create({ model: 'remote-slow', messages: ask('go slowly'), stream: true }, { signal: controller.signal });
    let seen = 0;
    try {
      for await (const c of stream) {
        if (c.choices[0]?.delta.content) seen++;
        if (seen === 3) controller.abort();
      }
    } catch (err) {
      expect(err).toBeInstanceOf(OpenAI.APIUserAbortError);
    }
    const upstreamRequest = upstreamCalls('slow').at(-1)!;
    await waitFor(() => upstreamRequest.finished, { description: 'the upstream request to be closed' });
    expect(upstreamRequest.abortedEarly).toBe(true);
    const row = await waitFor(() => chatUsageRows(prisma, { namespace: payer.namespace }).then((r) => r[0]));
    expect(row).toMatchObject({ status: 'cancelled', stream: true });
    expect(row.completionTokens).toBeGreaterThan(0);
    await waitFor(async () => (await balance(payer)).reserved === '0', { description: 'the reservation to be settled' });
  });

  describe('the hand-off overlapping the credit reservation', () => {
    const metrics = async () => (await stack.gw.http.request('GET', '/metrics')).text;
    const overlapped = async () => metricValue(await metrics(), 'atelier_stage_duration_seconds_count', { stage: 'chat.reserve_overlapped' }) || 0;
    const refusals = async () => metricValue(await metrics(), 'atelier_overlapped_refusals_total') || 0;
    const stream = async (t: Tenant, model: string) =>
      fetch(`${stack.base}/api/ai/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: ask('overlap'), stream: true }),
      });

    it('streams every chunk in order and charges it once when the reservation is still being taken at the hand-off', async () => {
      const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
      // The first request finds how much the namespace can spend; the ones after overlap.
      await stack.client(payer.apiKey).chat.completions.create({ model: 'remote-echo', messages: ask('prime'), max_tokens: 5 });
      await waitFor(async () => (await balance(payer)).reserved === '0');
      const before = await overlapped();
      const res = await stream(payer, 'remote-echo');
      const text = await res.text();
      expect(res.status).toBe(200);
      expect(await overlapped()).toBe(before + 1);
      expect(sseEvents(text).at(-1)?.data).toBe('[DONE]');
      const chunks = sseJson<ChatCompletionChunk>(text);
      expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Echo: overlap');
      const usage = chunks.at(-1)!.usage!;
      await waitFor(async () => (await balance(payer)).reserved === '0', { description: 'the charge to be settled' });
      const rows = await waitFor(async () => {
        const found = await chatUsageRows(prisma, { namespace: payer.namespace });
        return found.length === 2 ? found : undefined;
      }, { description: 'both usage records' });
      expect(rows[1]).toMatchObject({ status: 'succeeded', stream: true, promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens });
      const charged = rows.reduce((sum, r) => sum + Number(r.cost), 0);
      expect(Number((await balance(payer)).credits)).toBeCloseTo(10 - charged, 9);
    });

    it('cancels the call and charges nothing when the reservation refuses a request whose hand-off already went out', async () => {
      const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
      await stack.client(payer.apiKey).chat.completions.create({ model: 'remote-echo', messages: ask('prime'), max_tokens: 5 });
      await waitFor(async () => (await balance(payer)).reserved === '0');
      // The operator takes nearly everything away after this gateway last saw ample credits.
      const left = (await balance(payer)).credits;
      const cut = await stack.gw.http.request('POST', `/api/admin/namespaces/${payer.namespace}/credits`, {
        token: stack.gw.adminToken,
        body: { amount: (0.0001 - Number(left)).toFixed(6) },
      });
      expect(cut.status).toBe(200);
      const [refusedBefore, slowBefore] = [await refusals(), upstreamCalls('slow').length];

      const res = await stream(payer, 'remote-slow');
      expect(res.status).toBe(402);
      expect((await res.json()) as unknown).toMatchObject({ error: { type: 'insufficient_credits' } });
      expect(await refusals()).toBe(refusedBefore + 1);
      // Whether or not the chat service had reached the upstream yet, nothing keeps running there.
      for (const call of upstreamCalls('slow').slice(slowBefore)) {
        await waitFor(() => call.finished, { description: 'the upstream call to be cut' });
        expect(call.abortedEarly).toBe(true);
      }
      expect(await balance(payer)).toMatchObject({ credits: '0.0001', reserved: '0' });
    });
  });
});
