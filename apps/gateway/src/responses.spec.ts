import * as fs from 'node:fs';
import * as path from 'node:path';
import OpenAI from 'openai';
import type { Response as OpenAiResponse, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { PrismaService } from '@atelier/db';
import { createTenant, sseJson, waitFor, type Tenant } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';

async function apiError(promise: Promise<unknown>): Promise<{ status: number | undefined; message: string; error: unknown }> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof OpenAI.APIError) return { status: err.status, message: (err.error as { message?: string } | undefined)?.message ?? err.message, error: err.error };
    throw err;
  }
  throw new Error('expected the request to fail');
}

/** A captured request of a real agent (copied from the spec's shared fixtures). */
function fixture(name: string): { path: string; body: Record<string, unknown> } {
  return JSON.parse(fs.readFileSync(path.join(__dirname, 'fixtures', name), 'utf8')) as { path: string; body: Record<string, unknown> };
}

/** The keys of a Response with the type of each value, to compare a streamed answer's shape with a non-streamed one's. */
const shapeOf = (r: object) => Object.fromEntries(Object.entries(r).filter(([k]) => k !== 'output_parsed').map(([k, v]) => [k, v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v]));

describe('the Responses API through the gateway (POST /api/ai/responses)', () => {
  let stack: ChatStack;
  let user: Tenant;
  let client: OpenAI;
  const upstreamCalls = (model: string) => stack.upstream.requests.filter((r) => r.model === model);
  const balance = async (t: Tenant) => (await stack.gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: t.apiKey })).body;

  beforeAll(async () => {
    stack = await startChatStack();
    user = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
    client = stack.client(user.apiKey);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('answers a string input from local-chat with a Response, billed per token and reported under /api/ai/responses', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const res = await stack.client(payer.apiKey).responses.create({ model: 'local-chat', input: 'Tell me about the sea.', instructions: 'Be brief.', max_output_tokens: 40, metadata: { run: 'r1' } });
    expect(res).toMatchObject({
      id: expect.stringMatching(/^resp_/),
      object: 'response',
      status: expect.stringMatching(/^(completed|incomplete)$/),
      model: 'local-chat',
      instructions: 'Be brief.',
      max_output_tokens: 40,
      metadata: { run: 'r1' },
      store: true,
      output: [{ type: 'message', id: expect.stringMatching(/^msg_/), role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: expect.any(String), annotations: [] }] }],
    });
    expect(res.output_text.length).toBeGreaterThan(0);
    expect(res.output_text).toBe((res.output[0] as { content: { text: string }[] }).content[0].text);
    expect(res.usage).toMatchObject({ input_tokens: expect.any(Number), output_tokens: expect.any(Number) });
    expect(res.usage!.total_tokens).toBe(res.usage!.input_tokens + res.usage!.output_tokens);
    expect(res.usage!.output_tokens).toBeLessThanOrEqual(40);
    await waitFor(async () => (await balance(payer)).reserved === '0', { description: 'the charge to be settled' });
    const cost = res.usage!.input_tokens * 0.000001 + res.usage!.output_tokens * 0.000002;
    expect(Number((await balance(payer)).credits)).toBeCloseTo(1 - cost, 6);
    const usage = await stack.gw.http.request<{ rows: { group: string; requests: number; input_tokens: number }[] }>('GET', '/api/usage?group_by=endpoint', { token: payer.apiKey });
    expect(usage.body.rows).toEqual([expect.objectContaining({ group: '/api/ai/responses', requests: 1, input_tokens: res.usage!.input_tokens })]);
  });

  it('streams the events in the order the SDK accumulates them, and the final Response has the non-streamed shape', async () => {
    const events: ResponseStreamEvent[] = [];
    const stream = client.responses.stream({ model: 'remote-echo', input: [{ role: 'user', content: 'hello stream' }] });
    for await (const event of stream) events.push(event);
    const final = await stream.finalResponse();
    const types = events.map((e) => e.type);
    expect(types.slice(0, 4)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    expect(types.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    expect(types.filter((t) => t === 'response.output_text.delta').length).toBeGreaterThan(1);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(final.output_text).toBe('Echo: hello stream');
    expect(final.usage).toMatchObject({ input_tokens: 21, output_tokens: 9, total_tokens: 30 });
    const plain = await client.responses.create({ model: 'remote-echo', input: [{ role: 'user', content: 'hello stream' }] });
    expect(shapeOf(final)).toEqual(shapeOf(plain));
    expect(plain.output_text).toBe(final.output_text);
    // Stored as it was answered.
    expect(await client.responses.retrieve(final.id)).toMatchObject({ id: final.id, output_text: 'Echo: hello stream', status: 'completed' });
  });

  it('runs a function-calling round trip over previous_response_id with a chat-only upstream, then GET, input_items and DELETE', async () => {
    const tools = [{ type: 'function' as const, name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: {} }, strict: false }];
    const first = await client.responses.create({ model: 'remote-tool', instructions: 'Use tools.', input: 'Weather in Oslo?', tools });
    expect(first.output).toEqual([expect.objectContaining({ type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: 'call_up_1', name: 'get_weather', arguments: '{}', status: 'completed' })]);
    const call = first.output[0] as { call_id: string };
    const second = await client.responses.create({
      model: 'remote-tool',
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temp": 7}' }],
      tools,
    });
    expect(second.output_text).toBe('Done: {"temp": 7}');
    expect(second.previous_response_id).toBe(first.id);
    // atelier rebuilt the history for the chat upstream: the instructions of the first turn do not carry over (as OpenAI's).
    expect(upstreamCalls('tool').at(-1)!.body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Weather in Oslo?' }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_up_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_up_1', content: '{"temp": 7}' },
    ]);

    const items = await client.responses.inputItems.list(second.id);
    expect(items.data.map((i) => i.type)).toEqual(['function_call_output', 'function_call', 'message']);
    const asc = await client.responses.inputItems.list(second.id, { order: 'asc', limit: 2 });
    expect(asc.data.map((i) => i.type)).toEqual(['message', 'function_call']);
    expect(asc.has_more).toBe(true);

    const stranger = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    expect(await apiError(stack.client(stranger.apiKey).responses.retrieve(second.id))).toMatchObject({ status: 404, message: `Response with id '${second.id}' not found.` });
    expect(
      await apiError(stack.client(stranger.apiKey).responses.create({ model: 'remote-echo', previous_response_id: second.id, input: 'hi' })),
    ).toMatchObject({ status: 404, message: `Previous response with id '${second.id}' not found.` });

    const deleted = await stack.gw.http.request('DELETE', `/api/ai/responses/${second.id}`, { token: user.apiKey });
    expect(deleted.body).toEqual({ id: second.id, object: 'response', deleted: true });
    expect(await apiError(client.responses.retrieve(second.id))).toMatchObject({ status: 404 });
    expect((await client.responses.retrieve(first.id)).id).toBe(first.id);
  });

  it('streams a function call as function_call_arguments events', async () => {
    const stream = client.responses.stream({ model: 'remote-tool', input: 'go', tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} }, strict: false }] });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    const final = await stream.finalResponse();
    expect(types).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(final.output).toEqual([expect.objectContaining({ type: 'function_call', name: 'lookup', arguments: '{}', call_id: 'call_up_1' })]);
  });

  it("takes the Codex CLI's request as captured: namespace tools flattened, hosted tools dropped and named, developer messages in one system message", async () => {
    const { body } = fixture('codex-0.169-responses-request.json');
    const res = await fetch(`${stack.base}/api/ai/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, model: 'remote-echo-wide' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-atelier-dropped-tools')).toBe('web_search');
    const events = sseJson<{ type: string; response?: OpenAiResponse }>(await res.text());
    const last = events.at(-1)!;
    expect(last.type).toBe('response.completed');
    expect(last.response!.output_text).toBe('Echo: say hi');
    expect((last.response as unknown as { store: boolean }).store).toBe(false);
    const sent = upstreamCalls('echo').at(-1)!.body as { messages: { role: string; content: unknown }[]; tools: { function: { name: string } }[] };
    expect(sent.messages.filter((m) => m.role === 'system')).toHaveLength(1);
    expect(sent.messages[0].role).toBe('system');
    expect(sent.messages.map((m) => m.role)).toEqual(['system', 'user', 'user']);
    const names = sent.tools.map((t) => t.function.name);
    expect(names).toEqual(expect.arrayContaining(['exec_command', 'view_image', 'multi_agent_v1__spawn_agent', 'multi_agent_v1__close_agent']));
    expect(names).not.toContain('web_search');
    // Not stored (store: false): nothing to retrieve.
    expect(await apiError(client.responses.retrieve(last.response!.id))).toMatchObject({ status: 404 });
  });

  it("stores only the fields each item type defines, bounds what is never counted, and keeps each turn's new items once", async () => {
    const junk = 'x'.repeat(200_000);
    const first = await client.responses.create({
      model: 'remote-echo',
      input: [
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'first turn', junk } as never], junk } as never,
        { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'e'.repeat(1000), junk } as never,
      ],
    });
    const items = await client.responses.inputItems.list(first.id, { order: 'asc' });
    expect(JSON.stringify(items.data)).not.toContain('junk');
    expect(items.data.map((i) => i.type)).toEqual(['message', 'reasoning']);
    // An opaque field past its bound is refused, naming the item; nothing is stored for it.
    const refused = await apiError(client.responses.create({ model: 'remote-echo', input: [{ type: 'reasoning', id: 'rs_2', summary: [], encrypted_content: 'e'.repeat(300 * 1024) } as never, { role: 'user', content: 'hi' }] }));
    expect(refused.status).toBe(400);
    expect(refused.message).toMatch(/^input\[0\]: a reasoning item may hold at most 262144 bytes/);
    // Three more turns: each row holds its own new items, and the history is rebuilt from the chain.
    let previous = first.id;
    for (const text of ['second', 'third', 'fourth']) previous = (await client.responses.create({ model: 'remote-echo', previous_response_id: previous, input: text })).id;
    const rows = await stack.gw.app.get(PrismaService).storedResponse.findMany({ where: { id: previous }, select: { inputItems: true } });
    expect((rows[0].inputItems as unknown[]).length).toBe(1);
    const all = await client.responses.inputItems.list(previous, { order: 'asc', limit: 100 });
    expect(all.data.map((i) => (i.type === 'message' ? `${i.role}` : i.type))).toEqual(['user', 'reasoning', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user']);
    expect(upstreamCalls('echo').at(-1)!.body.messages).toHaveLength(7);
    // Deleting a turn in the middle leaves the turns after it whole.
    const middle = (await stack.gw.app.get(PrismaService).storedResponse.findUniqueOrThrow({ where: { id: previous } })).previousResponseId!;
    await stack.gw.http.request('DELETE', `/api/ai/responses/${middle}`, { token: user.apiKey });
    expect((await client.responses.inputItems.list(previous, { order: 'asc', limit: 100 })).data).toHaveLength(8);
  });

  it('refuses what it cannot honour with a 400 naming the parameter, and an unknown previous_response_id with 404', async () => {
    const cases: [Record<string, unknown>, number, RegExp][] = [
      [{ model: 'local-chat', input: 'x', background: true, store: false }, 400, /^background responses are stored/],
      [{ model: 'local-chat', input: 'x', conversation: 'conv_1' }, 400, /^conversation is not supported/],
      [{ model: 'local-chat', input: 'x', tools: [{ type: 'web_search' }], tool_choice: { type: 'web_search' } }, 400, /^tool_choice forces the hosted tool 'web_search'/],
      [{ model: 'local-chat', input: 'x', tools: [{ type: 'web_search' }], tool_choice: 'required' }, 400, /^tool_choice 'required' needs a function tool/],
      [{ model: 'local-chat' }, 400, /^input is required$/],
      [{ model: 'local-chat', input: [{ type: 'function_call_output', call_id: 'nope', output: '1' }] }, 400, /^No tool call found for function call output with call_id nope\.$/],
      [{ model: 'local-chat', input: 'x', max_output_tokens: 100_000 }, 400, /max_output_tokens/],
      [{ model: 'local-chat', input: 'x', text: { format: { type: 'xml' } } }, 400, /^text\.format\.type must be one of/],
      [{ model: 'local-chat', input: 'x', previous_response_id: 'resp_unknown' }, 404, /^Previous response with id 'resp_unknown' not found\.$/],
      [{ model: 'no-such-model', input: 'x' }, 404, /^Model not found: no-such-model$/],
    ];
    for (const [body, status, message] of cases) {
      const res = await stack.gw.http.request<{ error: { message: string } }>('POST', '/api/ai/responses', { token: user.apiKey, body });
      expect({ body, status: res.status, message: res.body.error?.message }).toEqual({ body, status, message: expect.stringMatching(message) });
    }
    // Accepted and ignored: OpenAI fields with nothing to do on a chat upstream.
    const ok = await stack.gw.http.request<OpenAiResponse>('POST', '/api/ai/responses', {
      token: user.apiKey,
      body: { model: 'remote-echo', input: 'fine', include: ['reasoning.encrypted_content'], reasoning: { summary: 'auto' }, prompt_cache_key: 'k', truncation: 'auto', service_tier: 'auto' },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.output_text).toBe('Echo: fine');
  });

  it('ends a stream that breaks upstream with response.failed carrying the error, and bills what was delivered', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const stream = stack.client(payer.apiKey).responses.stream({ model: 'remote-error-stream', input: 'break' });
    const seen: ResponseStreamEvent[] = [];
    for await (const event of stream) seen.push(event);
    expect(seen.map((e) => e.type)).toContain('response.output_text.delta');
    const last = seen.at(-1)!;
    expect(last.type).toBe('response.failed');
    expect((last as { response: OpenAiResponse }).response).toMatchObject({ status: 'failed', error: { code: 'upstream_error', message: expect.stringContaining('upstream worker crashed') } });
    // The message it broke off in is closed as incomplete, not completed.
    expect((last as { response: OpenAiResponse }).response.output).toEqual([expect.objectContaining({ type: 'message', status: 'incomplete' })]);
    expect(seen.find((e) => e.type === 'response.output_item.done')).toMatchObject({ item: { status: 'incomplete' } });
    await waitFor(async () => (await balance(payer)).reserved === '0', { description: 'the charge to be settled' });
    // The prompt and the two deltas delivered were billed; nothing more.
    expect(Number((await balance(payer)).credits)).toBeLessThan(1);
  });

  describe('with an upstream that speaks it natively (responses_api)', () => {
    const sent = () => stack.upstream.requests.filter((r) => r.model.startsWith('responder'));

    it('forwards the request as it is, only the hosted tools the catalog allows, within the reserved output, and keeps reasoning items across turns over previous_response_id', async () => {
      const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
      const payerClient = stack.client(payer.apiKey);
      const fn = { type: 'function' as const, name: 'f', parameters: { type: 'object', properties: {} }, strict: false };
      const tools = [{ type: 'web_search' as const }, { type: 'file_search' as const, vector_store_ids: ['vs_operator'] }, { type: 'mcp' as const, server_label: 'x', server_url: 'https://mcp.example' }, fn];
      const { data: first, response: raw } = await payerClient.responses.create({ model: 'remote-responder', input: 'think about it', reasoning: { effort: 'high' }, tools }).withResponse();
      expect(first).toMatchObject({ id: expect.stringMatching(/^resp_/), model: 'remote-responder', status: 'completed', output_text: 'Native: think about it', usage: { input_tokens: 11, output_tokens: 4 } });
      expect(first.id).not.toBe('resp_upstream');
      expect(first.output.map((item) => item.type)).toEqual(['reasoning', 'message']);
      // The operator's account runs no hosted tool for a caller unless the catalog entry says so; the output is capped at the reservation.
      expect(raw.headers.get('x-atelier-dropped-tools')).toBe('web_search, file_search, mcp');
      const firstSent = sent().at(-1)!.body;
      expect(firstSent).toMatchObject({ model: 'responder', input: 'think about it', tools: [fn], reasoning: { effort: 'high' }, store: false, stream: false, include: ['reasoning.encrypted_content'], max_output_tokens: 256 });
      const allowed = await payerClient.responses.create({ model: 'remote-responder-search', input: 'search it', tools, max_output_tokens: 50 }).withResponse();
      expect(allowed.response.headers.get('x-atelier-dropped-tools')).toBe('file_search, mcp');
      expect(sent().at(-1)!.body).toMatchObject({ tools: [{ type: 'web_search' }, fn], max_output_tokens: 50 });
      expect(await apiError(payerClient.responses.create({ model: 'remote-responder', input: 'x', tools, tool_choice: { type: 'file_search' } }))).toMatchObject({ status: 400, message: expect.stringMatching(/^tool_choice forces the hosted tool 'file_search'/) });

      const second = await payerClient.responses.create({ model: 'remote-responder', previous_response_id: first.id, input: 'and now?', reasoning: { effort: 'high' } });
      expect(second.output_text).toBe('Native: and now?');
      const secondSent = sent().at(-1)!.body as { input: Record<string, unknown>[]; previous_response_id?: string };
      expect(secondSent.previous_response_id).toBeUndefined();
      // The first turn's reasoning item, with its encrypted content, went back to the upstream.
      expect(secondSent.input).toEqual([
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'think about it' }] },
        { type: 'reasoning', id: 'rs_up_1', summary: [], encrypted_content: 'enc-1' },
        expect.objectContaining({ type: 'message', role: 'assistant' }),
        { role: 'user', content: 'and now?' },
      ]);
      expect((second.output[0] as { encrypted_content?: string }).encrypted_content).toBe('enc-2');
      const balance = () => stack.gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: payer.apiKey });
      await waitFor(async () => (await balance()).body.reserved === '0', { description: 'the charges to be settled' });
      expect(Number((await balance()).body.credits)).toBeCloseTo(1 - 3 * (11 * 0.00001 + 4 * 0.00003), 6);
    });

    it("streams the upstream's events under atelier's response id, and a failing upstream ends with response.failed", async () => {
      const stream = client.responses.stream({ model: 'remote-responder', input: 'stream it' });
      const events: ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      const final = await stream.finalResponse();
      expect(final.output_text).toBe('Native: stream it');
      expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
      expect(events[0]).toMatchObject({ type: 'response.created', response: { id: final.id } });
      expect(events.at(-1)!.type).toBe('response.completed');
      expect((await client.responses.retrieve(final.id)).output_text).toBe('Native: stream it');

      const failing = client.responses.stream({ model: 'remote-responder-fail', input: 'x' });
      const seen: ResponseStreamEvent[] = [];
      for await (const event of failing) seen.push(event);
      expect(seen.map((e) => e.type)).toEqual(['response.created', 'response.failed']);
      expect((seen[1] as { response: OpenAiResponse }).response.error).toMatchObject({ code: 'upstream_error', message: expect.stringContaining('the reasoner fell over') });
    });
  });
});

describe('the Responses store bounds a conversation (RESPONSES_MAX_CHAIN_BYTES)', () => {
  let stack: ChatStack;
  beforeAll(async () => {
    stack = await startChatStack({ RESPONSES_MAX_CHAIN_BYTES: '20000' });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('refuses the turn that would take its conversation past the bound, with a 400 naming previous_response_id; store: false still answers', async () => {
    const user = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    const client = stack.client(user.apiKey);
    let previous = (await client.responses.create({ model: 'remote-echo', input: 'a'.repeat(4000) })).id;
    let refused: Awaited<ReturnType<typeof apiError>> | undefined;
    for (let turn = 0; turn < 10 && !refused; turn++) {
      try {
        previous = (await client.responses.create({ model: 'remote-echo', previous_response_id: previous, input: 'b'.repeat(4000) })).id;
      } catch {
        refused = await apiError(client.responses.create({ model: 'remote-echo', previous_response_id: previous, input: 'b'.repeat(4000) }));
      }
    }
    expect(refused).toMatchObject({ status: 400, message: expect.stringMatching(/^The conversation of previous_response_id would hold \d+ bytes, more than the 20000 a conversation may store/) });
    const unstored = await client.responses.create({ model: 'remote-echo', previous_response_id: previous, input: 'b'.repeat(4000), store: false });
    expect((unstored as unknown as { store: boolean }).store).toBe(false);
  });
});
