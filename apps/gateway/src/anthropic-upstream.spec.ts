import Anthropic from '@anthropic-ai/sdk';
import { createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';

/**
 * An `anthropic` engine (a Claude upstream, here a real HTTP server speaking the Messages API):
 * Messages requests go to it as they are; chat completions and Responses requests are translated
 * to Messages and back, so the OpenAI SDK works against it unchanged.
 */
describe('an anthropic upstream, both ways', () => {
  let stack: ChatStack;
  let user: Tenant;
  const anthropic = (apiKey: string, headers: Record<string, string> = {}) => new Anthropic({ apiKey, baseURL: `${stack.base}/api/anthropic`, maxRetries: 0, timeout: 20_000, defaultHeaders: headers });
  const balance = async (t: Tenant) => (await stack.gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: t.apiKey })).body;
  const settled = async (t: Tenant) => {
    await waitFor(async () => (await balance(t)).reserved === '0', { description: 'the charge to be settled' });
    return Number((await balance(t)).credits);
  };
  const lastNative = () => stack.anthropicUpstream.requests.at(-1)!;

  beforeAll(async () => {
    stack = await startChatStack();
    user = await createTenant(stack.gw.http, stack.gw.adminToken, '100');
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('forwards a Messages request as it is (anthropic-version, anthropic-beta, cache_control), and bills the usage it reports, cache included', async () => {
    const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
    const client = anthropic(payer.apiKey, { 'anthropic-beta': 'context-management-2025-06-27' });
    const message = await client.messages.create({
      model: 'claude-native',
      max_tokens: 100,
      system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: 'hello native' }],
    });
    expect(message).toMatchObject({ type: 'message', model: 'claude-native', content: [{ type: 'text', text: 'Native: hello native' }], usage: { input_tokens: 30, output_tokens: 6, cache_creation_input_tokens: 4, cache_read_input_tokens: 10 } });
    expect(lastNative()).toMatchObject({ model: 'claude-echo', version: '2023-06-01', beta: 'context-management-2025-06-27' });
    expect(lastNative().body).toMatchObject({ max_tokens: 100, system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }] });
    // 30 + 4 + 10 input tokens and 6 output at the model's prices.
    expect(await settled(payer)).toBeCloseTo(1 - (44 * 0.00001 + 6 * 0.00003), 6);

    const stream = client.messages.stream({ model: 'claude-native-tool', max_tokens: 100, tools: [{ name: 'weather', input_schema: { type: 'object', properties: {} } }], messages: [{ role: 'user', content: 'go' }] });
    const final = await stream.finalMessage();
    expect(final.content).toEqual([{ type: 'tool_use', id: 'toolu_native_1', name: 'weather', input: { city: 'Oslo' } }]);
    expect(final.model).toBe('claude-native-tool');
    expect(lastNative().body).toMatchObject({ stream: true, tools: [{ name: 'weather' }] });
  });

  it('answers chat completions (plain, streamed, with a tool round trip) and Responses from a Claude upstream, through the OpenAI SDK', async () => {
    const openai = stack.client(user.apiKey);
    const plain = await openai.chat.completions.create({ model: 'claude-native', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi there' }], max_tokens: 50 });
    expect(plain.choices[0]).toMatchObject({ message: { role: 'assistant', content: 'Native: hi there' }, finish_reason: 'stop' });
    expect(plain.usage).toMatchObject({ prompt_tokens: 44, completion_tokens: 6, total_tokens: 50 });
    expect(lastNative().body).toEqual({ model: 'claude-echo', max_tokens: 50, system: 'Be brief.', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi there' }] }] });

    const chunks = await openai.chat.completions.create({ model: 'claude-native', messages: [{ role: 'user', content: 'streamed' }], stream: true });
    let text = '';
    let usage: unknown;
    for await (const chunk of chunks) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('Native: streamed');
    expect(usage).toMatchObject({ prompt_tokens: 44, completion_tokens: 6 });

    const tools = [{ type: 'function' as const, function: { name: 'weather', parameters: { type: 'object', properties: {} } } }];
    const first = await openai.chat.completions.create({ model: 'claude-native-tool', messages: [{ role: 'user', content: 'Weather?' }], tools });
    expect(first.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { tool_calls: [{ id: 'toolu_native_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] } });
    const second = await openai.chat.completions.create({
      model: 'claude-native-tool',
      tools,
      messages: [{ role: 'user', content: 'Weather?' }, first.choices[0].message, { role: 'tool', tool_call_id: 'toolu_native_1', content: 'sunny' }],
    });
    expect(second.choices[0].message.content).toBe('Done: sunny');
    expect(lastNative().body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Weather?' }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_native_1', name: 'weather', input: { city: 'Oslo' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_native_1', content: 'sunny' }] },
    ]);

    const response = await openai.responses.create({ model: 'claude-native', input: 'via responses' });
    expect(response.output_text).toBe('Native: via responses');
  });

  it("passes an upstream overloaded on every attempt as 529 overloaded_error to Anthropic's clients, and as the upstream's 429 to OpenAI's", async () => {
    const refused = await anthropic(user.apiKey).messages.create({ model: 'claude-native-overloaded', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(Anthropic.APIError);
    expect((refused as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
    expect((refused as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: 'error', error: { type: 'overloaded_error', message: expect.stringContaining('Overloaded') } });
    const chat = await stack.gw.http.request<{ error: { type: string } }>('POST', '/api/ai/chat/completions', { token: user.apiKey, body: { model: 'claude-native-overloaded', messages: [{ role: 'user', content: 'x' }] } });
    expect(chat.status).toBe(429);
    expect(chat.body.error.type).toBe('rate_limited');
  });
});
