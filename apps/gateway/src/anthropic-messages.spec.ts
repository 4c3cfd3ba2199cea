import Anthropic from '@anthropic-ai/sdk';
import { createTenant, sseEvents, waitFor, type Tenant } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';

/** What the SDK threw: its status, Anthropic's error body and the request id it read. */
async function apiError(promise: Promise<unknown>): Promise<{ status: number | undefined; error: unknown; requestId: string | null | undefined; headers: Headers | undefined; kind: string }> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof Anthropic.APIError) return { status: err.status, error: err.error, requestId: err.requestID, headers: err.headers as Headers | undefined, kind: err.constructor.name };
    throw err;
  }
  throw new Error('expected the request to fail');
}

describe("Anthropic's Messages API through the gateway (/api/anthropic/v1), with the official SDK", () => {
  let stack: ChatStack;
  let user: Tenant;
  let client: Anthropic;
  const anthropic = (apiKey: string, maxRetries = 0) => new Anthropic({ apiKey, baseURL: `${stack.base}/api/anthropic`, maxRetries, timeout: 20_000 });
  const balance = async (t: Tenant) => (await stack.gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: t.apiKey })).body;
  const settled = async (t: Tenant) => {
    await waitFor(async () => (await balance(t)).reserved === '0', { description: 'the charge to be settled' });
    return Number((await balance(t)).credits);
  };

  beforeAll(async () => {
    stack = await startChatStack();
    user = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
    client = anthropic(user.apiKey);
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('answers messages.create with a Message (x-api-key), billed per token and reported under /api/anthropic/v1/messages', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const message = await anthropic(payer.apiKey).messages.create({ model: 'remote-echo', max_tokens: 100, system: 'Be brief.', messages: [{ role: 'user', content: 'hello there' }] });
    expect(message).toEqual({
      id: expect.stringMatching(/^msg_/),
      type: 'message',
      role: 'assistant',
      model: 'remote-echo',
      content: [{ type: 'text', text: 'Echo: hello there' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 21, output_tokens: 9, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    });
    expect(stack.upstream.requests.at(-1)!.body).toMatchObject({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hello there' }], max_tokens: 100 });
    expect(await settled(payer)).toBeCloseTo(1 - (21 * 0.00001 + 9 * 0.00003), 6);
    const usage = await stack.gw.http.request<{ rows: { group: string; requests: number }[] }>('GET', '/api/usage?group_by=endpoint', { token: payer.apiKey });
    expect(usage.body.rows).toEqual([expect.objectContaining({ group: '/api/anthropic/v1/messages', requests: 1 })]);
  });

  it("keeps Messages traffic the namespace's capture_rate samples as stored completions under the msg_ id, native or translated, streamed or not, and takes feedback on it", async () => {
    const team = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    const outsider = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    expect((await stack.gw.http.request('PUT', `/api/admin/namespaces/${team.namespace}/limits`, { token: stack.gw.adminToken, body: { capture_rate: 1 } })).status).toBe(200);
    const sdk = anthropic(team.apiKey);
    const ask = { max_tokens: 100, messages: [{ role: 'user' as const, content: 'keep this' }] };
    const made = [
      await sdk.messages.create({ model: 'remote-echo', ...ask }),
      await sdk.messages.stream({ model: 'remote-echo', ...ask }).finalMessage(),
      await sdk.messages.create({ model: 'claude-native', ...ask }),
      await sdk.messages.stream({ model: 'claude-native', ...ask }).finalMessage(),
    ];
    const read = (t: Tenant, id: string) => stack.gw.http.request<Record<string, unknown>>('GET', `/api/ai/chat/completions/${id}`, { token: t.apiKey });
    for (const message of made) {
      expect(message.id).toMatch(/^msg_/);
      const stored = await read(team, message.id);
      expect(stored.status).toBe(200);
      const text = (message.content[0] as { text: string }).text;
      expect(stored.body).toMatchObject({ id: message.id, object: 'chat.completion', choices: [{ message: { role: 'assistant', content: text } }] });
      const messages = await stack.gw.http.request<{ data: { role: string; content: unknown }[] }>('GET', `/api/ai/chat/completions/${message.id}/messages`, { token: team.apiKey });
      expect(messages.body.data.map((m) => [m.role, m.content])).toEqual([['user', 'keep this']]);
      // Another namespace sees none of it.
      expect((await read(outsider, message.id)).status).toBe(404);
    }
    await stack.gw.http.request('POST', '/api/feedback_metrics', { token: team.apiKey, body: { name: 'ok', type: 'boolean', optimize: 'max' } });
    const judged = await stack.gw.http.request<Record<string, unknown>>('POST', '/api/ai/feedback', { token: team.apiKey, body: { target_id: made[2].id, metric: 'ok', value: true } });
    expect(judged.status).toBe(200);
    expect((await read(team, made[2].id)).body.feedback).toEqual([expect.objectContaining({ metric: 'ok', value: 1 })]);
    expect((await stack.gw.http.request('POST', '/api/ai/feedback', { token: outsider.apiKey, body: { target_id: made[2].id, metric: 'ok', value: true } })).status).toBe(404);
    // Without a capture_rate nothing is kept.
    const unsampled = await client.messages.create({ model: 'remote-echo', ...ask });
    expect((await read(user, unsampled.id)).status).toBe(404);
  });

  it('streams in Anthropic\'s order through messages.stream, and runs a tool round trip over a chat-only upstream', async () => {
    const tools = [{ name: 'get_weather', description: 'Weather of a city', input_schema: { type: 'object' as const, properties: {} } }];
    const stream = client.messages.stream({ model: 'remote-tool', max_tokens: 200, tools, messages: [{ role: 'user', content: 'Weather in Oslo?' }] });
    const types: string[] = [];
    stream.on('streamEvent', (event) => types.push(event.type));
    const first = await stream.finalMessage();
    expect(types).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
    expect(first.content).toEqual([{ type: 'tool_use', id: 'call_up_1', name: 'get_weather', input: {} }]);
    expect(first.stop_reason).toBe('tool_use');
    expect(first.usage).toMatchObject({ input_tokens: 21, output_tokens: 9, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });

    const second = await client.messages.create({
      model: 'remote-tool',
      max_tokens: 200,
      tools,
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_up_1', content: '{"temp": 7}', cache_control: { type: 'ephemeral' } }] },
      ],
    });
    expect(second.content).toEqual([{ type: 'text', text: 'Done: {"temp": 7}' }]);
    expect(stack.upstream.requests.at(-1)!.body.messages).toEqual([
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_up_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_up_1', content: '{"temp": 7}' },
    ]);
  });

  it('counts tokens for free, lists the models with their aliases, and serves a model by its alias', async () => {
    await settled(user);
    const before = await balance(user);
    const request = { model: 'claude-sonnet-4-6', messages: [{ role: 'user' as const, content: 'How many tokens is this sentence?' }] };
    const counted = await client.messages.countTokens(request);
    expect(counted.input_tokens).toBeGreaterThan(5);
    expect((await client.messages.countTokens({ ...request, system: 'A much longer system prompt than none at all.' })).input_tokens).toBeGreaterThan(counted.input_tokens);
    expect(await balance(user)).toEqual(before);

    const ids: string[] = [];
    for await (const model of client.models.list({ limit: 3 })) ids.push(model.id);
    expect(ids).toEqual([...ids].sort());
    expect(ids).toEqual(expect.arrayContaining(['claude-haiku-4-5', 'claude-sonnet-4-6', 'local-chat', 'remote-writer']));
    expect(await client.models.retrieve('claude-sonnet-4-6')).toEqual({ type: 'model', id: 'claude-sonnet-4-6', display_name: 'remote-writer (as claude-sonnet-4-6)', created_at: '2026-01-01T00:00:00.000Z' });

    const aliased = await client.messages.create({ model: 'claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
    expect(aliased.model).toBe('claude-haiku-4-5');
    expect(stack.upstream.requests.at(-1)!.model).toBe('writer');
    // Claude Code asks 32,000 of any model: a ceiling, lowered to what the model's window leaves.
    const big = await client.messages.create({ model: 'local-chat', max_tokens: 32000, messages: [{ role: 'user', content: 'hi' }] });
    expect(big.usage.output_tokens).toBeGreaterThan(0);
  });

  it("refuses in Anthropic's envelope with its types, the request-id header and the SDK's typed errors", async () => {
    const unauthenticated = await apiError(anthropic('atl_nope_nope').messages.create({ model: 'remote-echo', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }));
    expect(unauthenticated).toMatchObject({ status: 401, kind: 'AuthenticationError', error: { type: 'error', error: { type: 'authentication_error', message: expect.any(String) } } });
    expect(unauthenticated.requestId).toBe((unauthenticated.error as { request_id: string }).request_id);

    const unknown = await apiError(client.messages.create({ model: 'no-such-model', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }));
    expect(unknown).toMatchObject({ status: 404, kind: 'NotFoundError', error: { type: 'error', error: { type: 'not_found_error', message: 'Model not found: no-such-model' } } });

    const raw = await fetch(`${stack.base}/api/anthropic/v1/messages?beta=true`, {
      method: 'POST',
      headers: { 'x-api-key': user.apiKey, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'remote-echo', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(raw.status).toBe(400);
    const body = (await raw.json()) as { request_id: string };
    expect(body).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringContaining('max_tokens: Field required') }, request_id: expect.any(String) });
    expect(raw.headers.get('request-id')).toBe(body.request_id);

    const broken = await fetch(`${stack.base}/api/anthropic/v1/messages`, { method: 'POST', headers: { 'x-api-key': user.apiKey, 'content-type': 'application/json' }, body: '{"model": ' });
    expect(broken.status).toBe(400);
    expect(await broken.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });

    const saturated = await apiError(client.messages.create({ model: 'remote-saturated', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }));
    expect(saturated).toMatchObject({ status: 529, error: { type: 'error', error: { type: 'overloaded_error' } } });

    // The caller's own limit: a RateLimitError with retry-after, which the SDK honours when it retries.
    const made = await stack.gw.http.request<{ api_key: string }>('POST', '/api/api_keys', { token: user.apiKey, body: { name: 'slow', limits: { rpm: 1 } } });
    const limited = anthropic(made.body.api_key);
    await limited.messages.create({ model: 'remote-echo', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] });
    const refused = await apiError(limited.messages.create({ model: 'remote-echo', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }));
    expect(refused).toMatchObject({ status: 429, kind: 'RateLimitError', error: { error: { type: 'rate_limit_error' } } });
    expect(Number(refused.headers?.get('retry-after'))).toBeGreaterThan(0);
  });

  it('ends a stream the upstream breaks off with an error event, never message_stop, and charges only what was delivered', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const res = await fetch(`${stack.base}/api/anthropic/v1/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${payer.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'remote-error-stream', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = sseEvents(await res.text());
    expect(events.map((e) => e.event)).toEqual(['message_start', 'ping', 'content_block_start', 'content_block_delta', 'content_block_delta', 'error']);
    expect(JSON.parse(events.at(-1)!.data)).toEqual({ type: 'error', error: { type: 'api_error', message: expect.any(String) } });
    const left = await settled(payer);
    expect(left).toBeLessThan(1);
    expect(left).toBeGreaterThan(1 - 0.01);
  });
});
