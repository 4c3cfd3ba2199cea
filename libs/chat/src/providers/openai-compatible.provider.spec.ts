import { ApiError } from '@atelier/contracts';
import type { ChatModelDefinition, OpenAiCompatibleEngineConfig } from '@atelier/models';
import { startFakeOpenAiUpstream, type FakeOpenAiUpstream } from '@atelier/testing';
import type { ChatRequest } from '../chat-types';
import type { ChatProviderCall } from './chat-provider';
import { OpenAiCompatibleProvider } from './openai-compatible.provider';

const request: ChatRequest = {
  model: 'm',
  messages: [{ role: 'user', content: 'hi' }],
  stream: false,
  maxTokens: 64,
  maxTokensExplicit: false,
  temperature: 1,
  topP: 1,
  frequencyPenalty: 0,
  presencePenalty: 0,
  stop: [],
  tools: [],
  toolChoice: 'none',
  parallelToolCalls: true,
  responseFormat: { type: 'text' },
};

/** A one-line answer, for the tests that stand up their own upstream server. */
const OK_ANSWER = JSON.stringify({ id: 'x', object: 'chat.completion', created: 1, model: 'echo', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] });

describe('OpenAiCompatibleProvider (fake upstream, no gateway)', () => {
  let upstream: FakeOpenAiUpstream;
  const secrets = (name: string) => (name === 'KEY' ? 'secret' : undefined);
  const provider = new OpenAiCompatibleProvider(secrets);
  beforeAll(async () => {
    upstream = await startFakeOpenAiUpstream({ apiKey: 'secret' });
  });
  afterAll(() => upstream?.close());

  const call = (engine: Partial<OpenAiCompatibleEngineConfig>, signal = new AbortController().signal): ChatProviderCall => ({
    model: {
      id: 'm',
      engine: { type: 'openai-compatible', base_url: upstream.url, upstream_model: 'echo', api_key_env: 'KEY', retry_backoff_ms: 1, ...engine },
    } as ChatModelDefinition,
    request,
    body: { model: 'm', messages: request.messages },
    promptTokens: 8,
    completionId: 'chatcmpl-test',
    created: 1,
    signal,
  });

  it('reaches an upstream at an IPv6 literal, and sends credentials in its URL as Basic auth unless an API key is set', async () => {
    const seen: { url?: string; authorization?: string }[] = [];
    const server = (await import('node:http')).createServer((req, res) => {
      seen.push({ url: req.url, authorization: req.headers.authorization });
      res.writeHead(200, { 'content-type': 'application/json' }).end(OK_ANSWER);
    });
    await new Promise<void>((r) => server.listen(0, '::1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const base = `http://us%40er:p%3Ass@[::1]:${port}/v1`;
      const out = await provider.complete(call({ base_url: base, api_key_env: undefined }));
      expect(out.completion.choices[0].message.content).toBe('ok');
      await provider.complete(call({ base_url: base }));
      expect(seen).toEqual([
        { url: '/v1/chat/completions', authorization: `Basic ${Buffer.from('us@er:p:ss').toString('base64')}` },
        { url: '/v1/chat/completions', authorization: 'Bearer secret' },
      ]);
    } finally {
      server.close();
    }
  });

  it('moves to the next provider when Retry-After asks for longer than it is worth waiting', async () => {
    const slow = await startFakeOpenAiUpstream({ apiKey: 'secret' });
    const server = (await import('node:http')).createServer((_req, res) => res.writeHead(429, { 'retry-after': '120' }).end('{}'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const started = Date.now();
      const out = await provider.complete(call({ base_url: `http://127.0.0.1:${port}/v1`, max_retries: 3, fallbacks: [{ base_url: slow.url, upstream_model: 'echo', api_key_env: 'KEY' }] }));
      expect(out.completion.choices[0].message.content).toBe('Echo: hi');
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      server.close();
      await slow.close();
    }
  });

  it("names the status of an upstream refusal that has no body, and reads its error text when it has one", async () => {
    const server = (await import('node:http')).createServer((req, res) => {
      if (req.url?.startsWith('/empty')) res.writeHead(400).end();
      else res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'temperature is too high' } }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      await expect(provider.complete(call({ base_url: `http://127.0.0.1:${port}/empty` }))).rejects.toMatchObject({
        message: 'The model provider rejected the request: Bad Request',
      });
      await expect(provider.complete(call({ base_url: `http://127.0.0.1:${port}/v1` }))).rejects.toMatchObject({
        message: 'The model provider rejected the request: temperature is too high',
      });
    } finally {
      server.close();
    }
  });

  it('retries a non-streamed answer cut off after its headers, and a cancel mid-body closes the upstream connection', async () => {
    const completion = JSON.stringify({ id: 'x', object: 'chat.completion', created: 1, model: 'echo', choices: [{ index: 0, message: { role: 'assistant', content: 'whole' }, finish_reason: 'stop' }] });
    let calls = 0;
    let hanging: Promise<void> | undefined;
    const server = (await import('node:http')).createServer((req, res) => {
      req.resume();
      calls++;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(completion.length) });
      res.write(completion.slice(0, 20));
      if (req.url?.startsWith('/hang')) hanging = new Promise((r) => res.socket!.once('close', () => r()));
      else if (calls === 1) res.socket!.destroy();
      else res.end(completion.slice(20));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const { completion: answer } = await provider.complete(call({ base_url: `http://127.0.0.1:${port}/v1`, max_retries: 1 }));
      expect(answer.choices[0].message.content).toBe('whole');
      expect(calls).toBe(2);

      const controller = new AbortController();
      const pending = provider.complete(call({ base_url: `http://127.0.0.1:${port}/hang`, timeout_ms: 60_000 }, controller.signal));
      while (!hanging) await new Promise((r) => setTimeout(r, 5));
      controller.abort();
      await expect(pending).rejects.toMatchObject({ message: 'The request was cancelled' });
      await hanging;
    } finally {
      server.close();
    }
  });

  it('does not retry after part of a stream went out, and reports the cut', async () => {
    const emitted: string[] = [];
    const err = await provider.stream(call({ upstream_model: 'cut', max_retries: 3 }), async (c) => void emitted.push(c)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).type).toBe('upstream_error');
    expect(emitted.length).toBeGreaterThan(0);
    expect(upstream.requests.filter((r) => r.model === 'cut')).toHaveLength(1);
  });

  it('stops waiting (and retrying) as soon as the caller cancels', async () => {
    const controller = new AbortController();
    const pending = provider.complete(call({ upstream_model: 'hang', timeout_ms: 60_000 }, controller.signal));
    setImmediate(() => controller.abort());
    await expect(pending).rejects.toMatchObject({ message: 'The request was cancelled' });
  });

  it('times out a silent upstream and retries it', async () => {
    await expect(provider.complete(call({ upstream_model: 'hang-timeout', timeout_ms: 50, max_retries: 1 }))).rejects.toMatchObject({ status: 504 });
    expect(upstream.requests.filter((r) => r.model === 'hang-timeout')).toHaveLength(2);
  });

  it('sends the resolved completion limit in the field the caller used', async () => {
    await provider.complete({ ...call({}), body: { model: 'm', messages: request.messages, max_tokens: 1024, max_completion_tokens: 64 } });
    const sent = upstream.requests.at(-1)!.body;
    expect(sent.max_completion_tokens).toBe(64);
    expect(sent.max_tokens).toBeUndefined();
  });

  /**
   * Two calls `pauseMs` apart to a server that keeps idle connections open and gives no
   * Keep-Alive hint (as uvicorn and most CDNs): how many connections they took.
   */
  async function connectionsForTwoCalls(engine: Partial<OpenAiCompatibleEngineConfig>, pauseMs: number): Promise<number> {
    const http = await import('node:http');
    let connections = 0;
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(OK_ANSWER);
    });
    // 0: no idle timeout, and so no `Keep-Alive: timeout=` header for undici to follow.
    server.keepAliveTimeout = 0;
    server.on('connection', () => connections++);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base_url = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
    try {
      await provider.complete(call({ ...engine, base_url }));
      await new Promise((r) => setTimeout(r, pauseMs));
      await provider.complete(call({ ...engine, base_url }));
      return connections;
    } finally {
      server.closeAllConnections();
      server.close();
    }
  }

  it('keeps an idle upstream connection for keep_alive_ms when the server gives no hint, 4 s by default', async () => {
    const [short, byDefault, long, defaultTooShort] = await Promise.all([
      connectionsForTwoCalls({ keep_alive_ms: 200 }, 700),
      connectionsForTwoCalls({}, 700),
      connectionsForTwoCalls({ keep_alive_ms: 30_000 }, 4_600),
      connectionsForTwoCalls({}, 4_600),
    ]);
    expect({ short, byDefault, long, defaultTooShort }).toEqual({ short: 2, byDefault: 1, long: 1, defaultTooShort: 2 });
  }, 15_000);
});
