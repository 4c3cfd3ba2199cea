import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { createPrismaClient, type PrismaClient } from '@atelier/db';
import { chatUsageRows, createTenant, waitFor, type Tenant } from '@atelier/testing';
import { startChatStack, type ChatStack } from './chat.harness';

const IN_PRICE = 0.000001; // local-chat catalog prices
const OUT_PRICE = 0.000002;

const weatherTool: ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the current weather for a city',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', minLength: 1 },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        days: { type: 'integer', minimum: 1, maximum: 7 },
      },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};

async function apiError(promise: Promise<unknown>): Promise<{ status: number; message: string }> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof OpenAI.APIError) return { status: err.status ?? 0, message: (err.error as { message?: string } | undefined)?.message ?? err.message };
    throw err;
  }
  throw new Error('expected the request to fail');
}

/** Raw SSE frames of a streamed call, for what the SDK hides (the [DONE] line, the exact framing). */
async function rawStream(base: string, apiKey: string, body: Record<string, unknown>): Promise<{ status: number; contentType: string | null; frames: string[] }> {
  const res = await fetch(`${base}/api/ai/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const text = await res.text();
  return { status: res.status, contentType: res.headers.get('content-type'), frames: text.split('\n\n').filter((f) => f !== '') };
}

describe('POST /api/ai/chat/completions with local-chat (OpenAI SDK, real gateway and chat service)', () => {
  let stack: ChatStack;
  let user: Tenant;
  let client: OpenAI;
  let prisma: PrismaClient;
  const ajv = addFormats(new Ajv2020({ strict: false }));

  beforeAll(async () => {
    stack = await startChatStack();
    user = await createTenant(stack.gw.http, stack.gw.adminToken, '10');
    client = stack.client(user.apiKey);
    prisma = createPrismaClient(stack.gw.env.databaseUrl, 2);
  });
  afterAll(async () => {
    await prisma?.$disconnect();
    await stack?.close();
  });

  const ask = (content: string) => [{ role: 'user', content }] as ChatCompletionMessageParam[];

  it('returns a chat.completion with a message, a finish reason and token usage', async () => {
    const res = await client.chat.completions.create({ model: 'local-chat', messages: ask('Tell me a story about a fox and some grapes.'), seed: 42 });
    expect(res).toMatchObject({
      id: expect.stringMatching(/^chatcmpl-/),
      object: 'chat.completion',
      created: expect.any(Number),
      model: 'local-chat',
      choices: [{ index: 0, message: { role: 'assistant', content: expect.any(String) }, finish_reason: expect.stringMatching(/^(stop|length)$/) }],
    });
    expect(res.choices[0].message.content!.length).toBeGreaterThan(10);
    const u = res.usage!;
    expect(u.prompt_tokens).toBeGreaterThan(5);
    expect(u.completion_tokens).toBeGreaterThan(0);
    expect(u.total_tokens).toBe(u.prompt_tokens + u.completion_tokens);
  });

  it('reads special-token text in a prompt as plain text, as the OpenAI API does, instead of failing on it', async () => {
    const plain = await client.chat.completions.create({ model: 'local-chat', messages: ask('a b'), max_tokens: 5 });
    const special = await client.chat.completions.create({ model: 'local-chat', messages: ask('a <|endoftext|> b'), max_tokens: 5 });
    // As one special token it would add 1; as text, "<|endoftext|>" is several ordinary tokens.
    expect(special.usage!.prompt_tokens - plain.usage!.prompt_tokens).toBeGreaterThanOrEqual(5);
  });

  it('answers a 1 MiB message (one unbroken run, or prose) within a second, without holding up other requests', async () => {
    // Token counting used to be quadratic in such a run: 1 MiB of "A" blocked the gateway for minutes.
    for (const unit of ['A', '中', '😀', 'plain words of prose ']) {
      const started = performance.now();
      const [big, other] = await Promise.all([
        stack.gw.http.request('POST', '/api/ai/chat/completions', { token: user.apiKey, body: { model: 'local-chat', messages: ask(unit.repeat((1 << 20) / unit.length)) } }),
        stack.gw.http.request('GET', '/api/ai/models/local-chat', { token: user.apiKey }),
      ]);
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(other.status).toBe(200);
      // Far over local-chat's 8,192-token context window: refused, saying so.
      expect(big.status).toBe(400);
      expect(big.body).toMatchObject({ error: { message: expect.stringMatching(/more than the context window/) } });
    }
  });

  it('refuses a 10 MiB message that is one unbroken run with 400 (finding the run overflowed the regexp stack: 500)', async () => {
    for (const unit of ['A', ' ']) {
      const big = await stack.gw.http.request('POST', '/api/ai/chat/completions', { token: user.apiKey, body: { model: 'local-chat', messages: ask(unit.repeat(10 << 20)) } });
      expect(big.status).toBe(400);
      expect(big.body).toMatchObject({ error: { message: expect.stringMatching(/more than the context window/) } });
    }
  });

  it('answers 200 with JSON, like the OpenAI API', async () => {
    const res = await stack.gw.http.request('POST', '/api/ai/chat/completions', { token: user.apiKey, body: { model: 'local-chat', messages: ask('hi'), seed: 1 } });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
  });

  it('is deterministic for a seed, and varies without one', async () => {
    const body = { model: 'local-chat', messages: ask('What did the tortoise say to the hare?'), seed: 7, temperature: 1.2 };
    const [a, b] = await Promise.all([client.chat.completions.create(body), client.chat.completions.create(body)]);
    expect(a.choices[0].message.content).toBe(b.choices[0].message.content);
    const other = await client.chat.completions.create({ ...body, seed: 8 });
    expect(other.choices[0].message.content).not.toBe(a.choices[0].message.content);
  });

  it('honours max_tokens (finish_reason length) and stop sequences', async () => {
    const long = await client.chat.completions.create({ model: 'local-chat', messages: ask('the north wind and the sun'), seed: 1, max_tokens: 6 });
    expect(long.choices[0].finish_reason).toBe('length');
    expect(long.usage!.completion_tokens).toBeLessThanOrEqual(6);
    expect(long.usage!.completion_tokens).toBeGreaterThan(0);

    const body = { model: 'local-chat', messages: ask('the lion and the mouse'), seed: 5, temperature: 0, max_tokens: 200 };
    const free = (await client.chat.completions.create(body)).choices[0].message.content!;
    const words = free.split(' ');
    const stop = ` ${words[Math.floor(words.length / 2)]}`;
    const stopped = await client.chat.completions.create({ ...body, stop: [stop, 'zzzz'] });
    expect(stopped.choices[0].finish_reason).toBe('stop');
    expect(stopped.choices[0].message.content).toBe(free.slice(0, free.indexOf(stop)));
  });

  it('accepts the temperature bounds 0 and 2 and refuses values outside them', async () => {
    for (const temperature of [0, 2]) {
      const res = await client.chat.completions.create({ model: 'local-chat', messages: ask('hello'), temperature, seed: 1 });
      expect(res.choices[0].message.content).toEqual(expect.any(String));
    }
    for (const temperature of [-0.1, 2.01]) {
      expect(await apiError(client.chat.completions.create({ model: 'local-chat', messages: ask('hello'), temperature }))).toEqual({
        status: 400,
        message: 'temperature must be a number between 0 and 2',
      });
    }
    // temperature 0 is greedy: the same answer every time, with or without a seed
    const greedy = { model: 'local-chat', messages: ask('a single man in possession of a good fortune'), temperature: 0 };
    const [g1, g2] = await Promise.all([client.chat.completions.create(greedy), client.chat.completions.create(greedy)]);
    expect(g1.choices[0].message.content).toBe(g2.choices[0].message.content);
  });

  it('streams chunks ending with a usage chunk and [DONE], with the same text as the non-streamed answer', async () => {
    const body = { model: 'local-chat', messages: ask('Tell me about Alice and the rabbit.'), seed: 11 };
    const plain = await client.chat.completions.create(body);
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(3);
    for (const c of chunks) expect(c).toMatchObject({ object: 'chat.completion.chunk', id: chunks[0].id, model: 'local-chat' });
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe(plain.choices[0].message.content);
    const last = chunks[chunks.length - 1];
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual(plain.usage);
    expect(chunks.some((c) => c.choices[0]?.finish_reason === plain.choices[0].finish_reason)).toBe(true);

    const raw = await rawStream(stack.base, user.apiKey, body);
    expect(raw.status).toBe(200);
    expect(raw.contentType).toMatch(/^text\/event-stream/);
    for (const frame of raw.frames) expect(frame).toMatch(/^data: /);
    expect(raw.frames[raw.frames.length - 1]).toBe('data: [DONE]');
    // The final chunk before [DONE] always carries usage, even without stream_options.include_usage.
    expect(JSON.parse(raw.frames[raw.frames.length - 2].slice(6)).usage).toEqual(plain.usage);
  });

  it('completes a tool-call round trip: tool_calls, then a tool message, then an answer', async () => {
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: "What's the weather in Paris today?" }];
    const first = await client.chat.completions.create({ model: 'local-chat', messages, tools: [weatherTool], seed: 3 });
    const choice = first.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toHaveLength(1);
    const call = choice.message.tool_calls![0] as { id: string; index?: number; type: string; function: { name: string; arguments: string } };
    expect(call).toMatchObject({ id: expect.stringMatching(/^call_/), index: 0, type: 'function', function: { name: 'get_weather' } });
    const args = JSON.parse(call.function.arguments);
    expect(ajv.validate(weatherTool.function.parameters!, args)).toBe(true);
    expect(args.city).toBe('Paris');

    messages.push(choice.message as ChatCompletionMessageParam, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 18, "sky": "clear"}' });
    const second = await client.chat.completions.create({ model: 'local-chat', messages, tools: [weatherTool], seed: 3 });
    expect(second.choices[0].finish_reason).toBe('stop');
    expect(second.choices[0].message.content).toContain('The get_weather tool returned {"temperature": 18, "sky": "clear"}');
  });

  it('forces tool calls with tool_choice required or a named function, and streams them', async () => {
    const other: ChatCompletionTool = { type: 'function', function: { name: 'lookup_order', parameters: { type: 'object', properties: { order_id: { type: 'string', pattern: '^ORD-[0-9]{6}$' } }, required: ['order_id'] } } };
    const named = await client.chat.completions.create({
      model: 'local-chat',
      messages: ask('hello there'),
      tools: [weatherTool, other],
      tool_choice: { type: 'function', function: { name: 'lookup_order' } },
    });
    const call = named.choices[0].message.tool_calls![0] as { function: { name: string; arguments: string } };
    expect(call.function.name).toBe('lookup_order');
    expect(JSON.parse(call.function.arguments).order_id).toMatch(/^ORD-[0-9]{6}$/);

    const required = await client.chat.completions.create({ model: 'local-chat', messages: ask('hello there'), tools: [weatherTool], tool_choice: 'required' });
    expect(required.choices[0].finish_reason).toBe('tool_calls');
    const none = await client.chat.completions.create({ model: 'local-chat', messages: ask('weather in Paris?'), tools: [weatherTool], tool_choice: 'none' });
    expect(none.choices[0].message.tool_calls ?? []).toEqual([]);

    const runner = client.chat.completions.stream({ model: 'local-chat', messages: ask('weather in Oslo?'), tools: [weatherTool], tool_choice: 'required', seed: 9 });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0].finish_reason).toBe('tool_calls');
    const streamed = final.choices[0].message.tool_calls![0] as { function: { name: string; arguments: string } };
    expect(ajv.validate(weatherTool.function.parameters!, JSON.parse(streamed.function.arguments))).toBe(true);
  });

  it('returns a JSON object in JSON mode and a value valid against the schema with json_schema', async () => {
    const obj = await client.chat.completions.create({ model: 'local-chat', messages: ask('describe the hare as JSON'), response_format: { type: 'json_object' }, seed: 2 });
    const parsed = JSON.parse(obj.choices[0].message.content!);
    expect(typeof parsed).toBe('object');
    expect(Array.isArray(parsed)).toBe(false);

    const schema = {
      type: 'object',
      properties: {
        title: { type: 'string', minLength: 3, maxLength: 40 },
        year: { type: 'integer', minimum: 1800, maximum: 1900 },
        rating: { type: 'number', exclusiveMinimum: 0, maximum: 5 },
        tags: { type: 'array', items: { type: 'string', enum: ['fable', 'novel', 'speech'] }, minItems: 1, maxItems: 3, uniqueItems: true },
        author: { type: 'object', properties: { name: { type: 'string' }, email: { type: 'string', format: 'email' } }, required: ['name', 'email'], additionalProperties: false },
        isbn: { type: ['string', 'null'], pattern: '^978-[0-9]{10}$' },
      },
      required: ['title', 'year', 'rating', 'tags', 'author', 'isbn'],
      additionalProperties: false,
    };
    for (const seed of [1, 2, 3]) {
      const res = await client.chat.completions.create({
        model: 'local-chat',
        messages: ask('Give me a book record for Pride and Prejudice'),
        response_format: { type: 'json_schema', json_schema: { name: 'book', schema, strict: true } },
        seed,
      });
      const value = JSON.parse(res.choices[0].message.content!);
      expect(ajv.validate(schema, value)).toBe(true);
    }
  });

  it('describes image and video parts it fetched', async () => {
    // 1x1 PNG as a data URI; video parts go through the same SSRF-guarded fetcher
    const png = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
    const res = await client.chat.completions.create({
      model: 'local-chat',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'what is in this picture?' }, { type: 'image_url', image_url: { url: png } }] }],
      seed: 1,
    });
    expect(res.choices[0].message.content).toMatch(/^I received an image \(image\/png, 1x1, 0\.1 KB\)\./);

    const blocked = await apiError(
      client.chat.completions.create({
        model: 'local-chat',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://169.254.169.254/latest/meta-data' } }] }],
      }),
    );
    expect(blocked.status).toBe(400);
    expect(blocked.message).toMatch(/169\.254\.169\.254/);
  });

  describe('errors', () => {
    const post = (body: unknown) => stack.gw.http.request('POST', '/api/ai/chat/completions', { token: user.apiKey, body });

    it.each([
      [{ messages: ask('hi') }, 400, 'You must specify a model to call'],
      [{ model: '', messages: ask('hi') }, 400, 'You must specify a model to call'],
      [{ model: 'local-chat', messages: [] }, 400, 'Messages array cannot be empty'],
      [{ model: 'local-chat' }, 400, 'Messages array cannot be empty'],
      [{ model: 'nope', messages: ask('hi') }, 404, 'Model not found: nope'],
      [{ model: 'local-image', messages: ask('hi') }, 400, 'Model local-image is not a chat model; use POST /api/ai/images/generate for it'],
      [{ model: 'local-video', messages: ask('hi') }, 400, 'Model local-video is not a chat model; use POST /api/ai/videos/generate for it'],
      [{ model: 7, messages: ask('hi') }, 400, 'model must be a string'],
      [{ model: 'local-chat', messages: ask('hi'), temperature: 'warm' }, 400, 'temperature must be a number between 0 and 2'],
      [{ model: 'local-chat', messages: ask('hi'), top_p: 1.5 }, 400, 'top_p must be a number between 0 and 1'],
      [{ model: 'local-chat', messages: ask('hi'), max_tokens: 0 }, 400, 'max_tokens must be an integer between 1 and 8192'],
      [{ model: 'local-chat', messages: ask('hi'), stream: 'yes' }, 400, 'stream must be a boolean'],
      [{ model: 'local-chat', messages: [{ role: 'robot', content: 'hi' }] }, 400, 'messages[0].role must be one of: system, developer, user, assistant, tool'],
      [{ model: 'local-chat', messages: [{ content: 'hi' }] }, 400, 'messages[0].role is required'],
      [{ model: 'local-chat', messages: [{ role: 'user', content: 5 }] }, 400, 'messages[0].content must be a string or an array of objects'],
      [{ model: 'local-chat', messages: [{ role: 'user', content: [{ type: 'audio_url', url: 'x' }] }] }, 400, 'messages[0].content[0].type must be one of: text, image_url, video_url'],
      [{ model: 'local-chat', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }, 400, 'messages[0].content[0].image_url.url is required'],
      [{ model: 'local-chat', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'ftp://x/y.png' } }] }] }, 400, 'messages[0].content[0].image_url.url must be a public http(s) URL or a data URI'],
      [{ model: 'local-chat', messages: [{ role: 'user', content: [{ type: 'text' }] }] }, 400, 'messages[0].content[0].text is required'],
      [{ model: 'local-chat', messages: [{ role: 'tool', content: '42' }] }, 400, 'messages[0].tool_call_id is required'],
      [{ model: 'local-chat', messages: [{ role: 'user', content: 'hi' }, { role: 'tool', tool_call_id: 'call_x', content: '42' }] }, 400, "messages[1].tool_call_id 'call_x' does not answer a tool call of the preceding assistant message"],
      [{ model: 'local-chat', messages: [{ role: 'assistant', content: null }] }, 400, 'messages[0].content is required unless the assistant message has tool_calls'],
      [{ model: 'local-chat', messages: ask('hi'), tool_choice: 'required' }, 400, 'tool_choice needs tools: declare the functions the model may call'],
      [{ model: 'local-chat', messages: ask('hi'), tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'nope' } } }, 400, "tool_choice.function.name 'nope' is not one of the declared tools"],
      [{ model: 'local-chat', messages: ask('hi'), tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'strin' } } } } }] }, 400, /^tools\[0\]\.function\.parameters is not a valid JSON Schema: /],
      [{ model: 'local-chat', messages: ask('hi'), response_format: { type: 'xml' } }, 400, 'response_format.type must be one of: text, json_object, json_schema'],
      [{ model: 'local-chat', messages: ask('hi'), n: 2 }, 400, 'n must be 1: atelier returns one choice per request'],
      [{ model: 'local-chat', messages: ask('hi'), max_tokens: 8190 }, 400, /^The messages use \d+ tokens and 8190 completion tokens were requested, more than the context window of model local-chat \(8192 tokens\)$/],
    ])('%j -> %i %s', async (body, status, message) => {
      const res = await post(body);
      expect(res.status).toBe(status);
      expect(res.body).toMatchObject({ status: 'error', error: { message } });
    });

    it('refuses caller schemas Ajv could not compile, and ones too large to check, without compiling them', async () => {
      const tool = (parameters: object) => ({ model: 'local-chat', messages: ask('hi'), tools: [{ type: 'function', function: { name: 'f', parameters } }] });
      const wide = { type: 'object', properties: Object.fromEntries(Array.from({ length: 6_000 }, (_, i) => [`p${i}`, { type: 'string' }])) };
      const cases: [object, string][] = [
        [tool(wide), 'tools[0].function.parameters is too large: it holds more than 5000 objects and arrays'],
        [tool({ type: 'string', pattern: '(' }), 'tools[0].function.parameters is not a valid JSON Schema: Invalid regular expression: /(/u: Unterminated group'],
        [tool({ $ref: '#/$defs/address' }), "tools[0].function.parameters is not a valid JSON Schema: can't resolve reference #/$defs/address from id #"],
        [
          { model: 'local-chat', messages: ask('hi'), response_format: { type: 'json_schema', json_schema: { name: 'r', schema: { $ref: 'https://example.com/r.json' } } } },
          "response_format.json_schema.schema is not a valid JSON Schema: can't resolve reference https://example.com/r.json from id #",
        ],
      ];
      for (const [body, message] of cases) {
        const res = await post(body);
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({ status: 'error', error: { message } });
      }
      // Taken by the check (a reference into data is only data to it), refused where local-chat compiles it: still a 400.
      const intoData = await post({ ...tool({ type: 'object', properties: { a: { $ref: '#/enum/0' } }, enum: [{ type: 'strin' }] }), tool_choice: 'required' });
      expect(intoData.status).toBe(400);
      expect(intoData.body).toMatchObject({ error: { message: 'tools[0].function.parameters is not a valid JSON Schema: type must be JSONType or JSONType[]: strin' } });
      // A schema with references that resolve is taken, and local-chat calls the tool with arguments valid against it.
      const tree = { $defs: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, type: 'object', properties: { city: { $ref: '#/$defs/city' } }, required: ['city'] };
      const res = await post({ ...tool(tree), tool_choice: 'required' });
      expect(res.status).toBe(200);
      const call = (res.body as { choices: { message: { tool_calls: { function: { arguments: string } }[] } }[] }).choices[0].message.tool_calls[0];
      expect(['Paris', 'Oslo']).toContain((JSON.parse(call.function.arguments) as { city: string }).city);
    });

    it('shows the spec texts through the OpenAI SDK', async () => {
      expect(await apiError(client.chat.completions.create({ model: 'local-chat', messages: [] }))).toEqual({ status: 400, message: 'Messages array cannot be empty' });
      expect(await apiError(client.chat.completions.create({ model: 'nope', messages: ask('hi') }))).toEqual({ status: 404, message: 'Model not found: nope' });
      expect(await apiError(client.chat.completions.create({ messages: ask('hi') } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming))).toEqual({
        status: 400,
        message: 'You must specify a model to call',
      });
    });

    it('refuses a request the balance cannot cover with 402 and a credit message, charging nothing', async () => {
      const poor = await createTenant(stack.gw.http, stack.gw.adminToken, '0.001');
      const err = await apiError(stack.client(poor.apiKey).chat.completions.create({ model: 'local-chat', messages: ask('hi'), max_tokens: 1000 }));
      expect(err.status).toBe(402);
      expect(err.message).toMatch(/^Insufficient credits: this request needs 0\.002\d* credits but only 0\.001 are available$/);
      const balance = await stack.gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: poor.apiKey });
      expect(balance.body).toMatchObject({ credits: '0.001', reserved: '0' });
    });
  });

  describe('billing', () => {
    const balance = async (t: Tenant) => (await stack.gw.http.request<{ credits: string; reserved: string }>('GET', '/api/credits', { token: t.apiKey })).body;
    /** The charge is settled right after the answer is sent; wait for it. */
    const settled = (t: Tenant) => waitFor(async () => ((b) => (b.reserved === '0' ? b : undefined))(await balance(t)), { description: 'the charge to be settled' });
    const expectedCost = (u: { prompt_tokens: number; completion_tokens: number }) => Number((u.prompt_tokens * IN_PRICE + u.completion_tokens * OUT_PRICE).toFixed(6));

    it('debits exactly the tokens used at the model prices and records the request', async () => {
      const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
      const c = stack.client(payer.apiKey);
      const res = await c.chat.completions.create({ model: 'local-chat', messages: ask('Four score and seven years ago'), seed: 4, max_tokens: 300 });
      const cost = expectedCost(res.usage!);
      expect(cost).toBeGreaterThan(0);
      expect(await settled(payer)).toEqual(expect.objectContaining({ credits: String(Number((1 - cost).toFixed(6))), reserved: '0' }));

      const row = await waitFor(() => chatUsageRows(prisma, { id: res.id }).then((r) => r[0]), { description: 'the usage record' });
      expect(row).toMatchObject({
        model: 'local-chat',
        provider: 'builtin:local-chat',
        stream: false,
        status: 'succeeded',
        promptTokens: res.usage!.prompt_tokens,
        completionTokens: res.usage!.completion_tokens,
      });
      expect(Number(row.cost)).toBe(cost);
      const reservation = await prisma.creditReservation.findUniqueOrThrow({ where: { id: row.reservationId! } });
      expect(reservation).toMatchObject({ status: 'settled', reference: `chat:${res.id}` });
      // The reservation was the upper bound: prompt tokens plus max_tokens.
      expect(reservation.amount.toNumber()).toBe(Number((res.usage!.prompt_tokens * IN_PRICE + 300 * OUT_PRICE).toFixed(6)));
    });

    it('bills streamed calls exactly from the final usage chunk', async () => {
      const payer = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
      let usage: { prompt_tokens: number; completion_tokens: number } | undefined;
      for await (const chunk of await stack.client(payer.apiKey).chat.completions.create({ model: 'local-chat', messages: ask('the ant and the grasshopper'), stream: true, seed: 8 }))
        usage = chunk.usage ?? usage;
      expect(usage).toBeDefined();
      expect(await settled(payer)).toEqual(expect.objectContaining({ credits: String(Number((1 - expectedCost(usage!)).toFixed(6))), reserved: '0' }));
    });

    it('bills an organization given as target_namespace', async () => {
      const member = await createTenant(stack.gw.http, stack.gw.adminToken, '1');
      const org = `org-${Date.now().toString(36)}`;
      await stack.gw.http.request('POST', '/api/admin/orgs', { token: stack.gw.adminToken, body: { name: org, members: [member.username], credits: '2' } });
      const res = await stack.client(member.apiKey).chat.completions.create({ model: 'local-chat', messages: ask('hi'), seed: 1, target_namespace: org } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      const orgBalance = await waitFor(async () => {
        const b = (await stack.gw.http.request<{ credits: string; reserved: string }>('GET', `/api/credits?namespace=${org}`, { token: member.apiKey })).body;
        return b.reserved === '0' ? b : undefined;
      });
      expect(orgBalance.credits).toBe(String(Number((2 - expectedCost(res.usage!)).toFixed(6))));
      expect((await balance(member)).credits).toBe('1');
      const outsider = await apiError(client.chat.completions.create({ model: 'local-chat', messages: ask('hi'), target_namespace: org } as OpenAI.ChatCompletionCreateParamsNonStreaming));
      expect(outsider.status).toBe(403);
    });
  });
});
