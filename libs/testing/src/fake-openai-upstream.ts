import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A real HTTP server speaking the OpenAI chat API, for tests and benchmarks of the
 * openai-compatible provider. What it does is chosen by the upstream model name in the body:
 *
 * - `echo`: answers "Echo: <last user text>" (streamed in a few chunks), with usage.
 * - `echo-no-usage`: the same without any usage (the caller must count).
 * - `tool`: calls the first declared tool with `{}` arguments (streamed: the name, then the arguments in two pieces);
 *   after a tool result, answers "Done: <the result>".
 * - `flaky-<n>`: fails the first n requests of each x-test-key with 503, then behaves like echo.
 * - `rate-limited-<n>`: like flaky, with 429 and `retry-after: 0`.
 * - `down`: always 500. `reject`: 400 with an OpenAI-style error body. `unauthorized`: 401.
 * - `hang`, `hang-*`: never answer (for timeouts).
 * - `cut`: streams two chunks, then destroys the connection.
 * - `error-mid-stream`: streams two chunks, then an error event.
 * - `slow`: streams a chunk every 50 ms for a minute (for client disconnects).
 * - `delay-<ms>`: answers as echo after that many milliseconds (work that takes time, unstreamed).
 * - `fixed`: a fixed short answer with usage 10/5 (benchmarks).
 * - `writer`: an agent's turn, scripted: a sentence, then a call of the declared `Write` tool with
 *   `{"file_path": "<the Primary working directory the prompt names>/<the file the user asks for>", "content":
 *   "written through the gateway\n"}` (streamed in pieces); after the tool result, "Wrote <file>." Usage 40/12.
 *
 * POST /embeddings (an OpenAI-compatible embedding server):
 * - `embed`: 8 floats per input, derived from its text (the same text, the same vector), usage 3 tokens per input;
 * - `embed-no-usage`: the same without usage; `embed-down`: always 500.
 *
 * POST /responses (a server that speaks OpenAI's Responses API):
 * - `responder`: a reasoning item (encrypted_content `enc-<turn>`, the turn counted from the reasoning items in
 *   the input) and the message "Native: <last user text>", usage 11/4; streamed as the Responses events;
 * - `responder-fail`: streams response.created, then response.failed.
 */
export function fakeEmbedding(input: string | number[]): number[] {
  const text = typeof input === 'string' ? input : input.join(' ');
  return Array.from({ length: 8 }, (_, d) => {
    let h = d + 1;
    for (let i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) % 1000003;
    return (h % 2001) / 1000 - 1;
  });
}
export interface FakeUpstreamRequest {
  model: string;
  body: Record<string, unknown>;
  authorization?: string;
  /** The W3C traceparent the caller sent (tracing on). */
  traceparent?: string;
  /** ... and its tracestate, which atelier never forwards. */
  tracestate?: string;
  testKey?: string;
  /** Set when the connection closed before the response was complete. */
  abortedEarly: boolean;
  finished: boolean;
}

export interface FakeOpenAiUpstream {
  url: string;
  requests: FakeUpstreamRequest[];
  close(): Promise<void>;
}

function lastUserText(body: Record<string, unknown>): string {
  const messages = (body.messages as { role: string; content: unknown }[] | undefined) ?? [];
  const user = [...messages].reverse().find((m) => m.role === 'user');
  if (!user) return '';
  if (typeof user.content === 'string') return user.content;
  if (Array.isArray(user.content)) return user.content.map((p: { text?: string }) => p.text ?? '').join(' ');
  return '';
}

const FIXED_BODY = JSON.stringify({
  id: 'chatcmpl-upstream',
  object: 'chat.completion',
  created: 1767225600,
  model: 'fixed',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the fake upstream.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
});

export interface FakeUpstreamOptions {
  /** Requests must carry `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Also sets this environment variable to the key, the way a deployment hands atelier a provider secret. */
  apiKeyEnv?: string;
  port?: number;
  /** Keep every request in `requests` (default true; benchmarks turn it off). */
  record?: boolean;
}

export async function startFakeOpenAiUpstream(opts: FakeUpstreamOptions = {}): Promise<FakeOpenAiUpstream> {
  if (opts.apiKey && opts.apiKeyEnv) process.env[opts.apiKeyEnv] = opts.apiKey;
  const requests: FakeUpstreamRequest[] = [];
  const failures = new Map<string, number>();
  const record = opts.record ?? true;

  /** Records the request (every route alike) and says whether its key is the right one; a wrong key got 401. */
  const accepted = (req: IncomingMessage, res: ServerResponse, model: string, body: Record<string, unknown>): boolean => {
    const entry: FakeUpstreamRequest = {
      model,
      body,
      authorization: req.headers.authorization,
      traceparent: req.headers.traceparent as string | undefined,
      tracestate: req.headers.tracestate as string | undefined,
      testKey: req.headers['x-test-key'] as string | undefined,
      abortedEarly: false,
      finished: false,
    };
    if (record) requests.push(entry);
    res.on('close', () => {
      if (!res.writableFinished) entry.abortedEarly = true;
      entry.finished = true;
    });
    if (opts.apiKey && req.headers.authorization !== `Bearer ${opts.apiKey}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"message":"Incorrect API key provided"}}');
      return false;
    }
    return true;
  };

  const embeddings = (req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>) => {
    const model = String(body.model);
    if (!accepted(req, res, model, body)) return;
    if (model === 'embed-down') return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"embedder exploded"}}');
    const input = body.input as string | string[] | number[][];
    const items = typeof input === 'string' ? [input] : input;
    // Answered in reverse order: a client must place vectors by their index.
    const data = items.map((item, index) => ({ object: 'embedding', index, embedding: fakeEmbedding(item) })).reverse();
    const usage = model === 'embed-no-usage' ? {} : { usage: { prompt_tokens: 3 * items.length, total_tokens: 3 * items.length } };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data, model, ...usage }));
  };

  const responses = (req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>) => {
    const model = String(body.model);
    if (!accepted(req, res, model, body)) return;
    const input = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : ((body.input as { type?: string; role?: string; content?: unknown }[]) ?? []);
    const user = [...input].reverse().find((item) => item.role === 'user');
    const said = typeof user?.content === 'string' ? user.content : Array.isArray(user?.content) ? (user.content as { text?: string }[]).map((p) => p.text ?? '').join('') : '';
    const turn = input.filter((item) => item.type === 'reasoning').length + 1;
    const reasoning = { type: 'reasoning', id: `rs_up_${turn}`, summary: [], encrypted_content: `enc-${turn}` };
    const text = `Native: ${said}`;
    const message = { type: 'message', id: `msg_up_${turn}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] };
    const response = { id: 'resp_upstream', object: 'response', created_at: 1767225600, status: 'completed', model, output: [reasoning, message], usage: { input_tokens: 11, output_tokens: 4, total_tokens: 15 } };
    if (body.stream !== true) return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(response));
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let n = 0;
    const send = (event: Record<string, unknown>) => res.write(`event: ${String(event.type)}\ndata: ${JSON.stringify({ ...event, sequence_number: n++ })}\n\n`);
    const inProgress = { ...response, status: 'in_progress', output: [], usage: null };
    send({ type: 'response.created', response: inProgress });
    if (model === 'responder-fail') {
      send({ type: 'response.failed', response: { ...inProgress, status: 'failed', error: { code: 'server_error', message: 'the reasoner fell over' } } });
      return void res.end();
    }
    send({ type: 'response.output_item.added', output_index: 0, item: reasoning });
    send({ type: 'response.output_item.done', output_index: 0, item: reasoning });
    send({ type: 'response.output_item.added', output_index: 1, item: { ...message, status: 'in_progress', content: [] } });
    send({ type: 'response.content_part.added', item_id: message.id, output_index: 1, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
    for (const piece of text.match(/\S+\s*/g) ?? [text]) send({ type: 'response.output_text.delta', item_id: message.id, output_index: 1, content_index: 0, delta: piece });
    send({ type: 'response.output_text.done', item_id: message.id, output_index: 1, content_index: 0, text });
    send({ type: 'response.content_part.done', item_id: message.id, output_index: 1, content_index: 0, part: message.content[0] });
    send({ type: 'response.output_item.done', output_index: 1, item: message });
    send({ type: 'response.completed', response });
    res.end();
  };

  const handle = (req: IncomingMessage, res: ServerResponse, raw: string) => {
    if (req.method === 'POST' && req.url?.endsWith('/responses')) return responses(req, res, JSON.parse(raw) as Record<string, unknown>);
    if (req.method === 'POST' && req.url?.endsWith('/embeddings')) return embeddings(req, res, JSON.parse(raw) as Record<string, unknown>);
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
      return;
    }
    const body = JSON.parse(raw) as Record<string, unknown>;
    const delayed = /^delay-(\d+)$/.exec(String(body.model));
    if (delayed) {
      const timer = setTimeout(() => handle(req, res, JSON.stringify({ ...body, model: 'echo' })), Number(delayed[1]));
      res.on('close', () => clearTimeout(timer));
      return;
    }
    const model = String(body.model);
    if (!accepted(req, res, model, body)) return;
    const stream = body.stream === true;
    const id = 'chatcmpl-upstream';
    const created = 1767225600;
    const chunk = (delta: Record<string, unknown>, finish: string | null = null, usage?: unknown) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: usage ? [] : [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`;
    const sse = () => res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });

    if (model === 'fixed') {
      if (!stream) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(FIXED_BODY) }).end(FIXED_BODY);
        return;
      }
      sse();
      res.write(chunk({ role: 'assistant', content: '' }));
      res.write(chunk({ content: 'Hello from the fake upstream.' }));
      res.write(chunk({}, 'stop'));
      res.end(`${chunk({}, null, { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 })}data: [DONE]\n\n`);
      return;
    }
    const counted = /^(flaky|rate-limited)-(\d+)$/.exec(model);
    if (counted) {
      const key = `${model}:${(req.headers['x-test-key'] as string | undefined) ?? ''}`;
      const seen = failures.get(key) ?? 0;
      if (seen < Number(counted[2])) {
        failures.set(key, seen + 1);
        if (counted[1] === 'flaky') res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"message":"overloaded"}}');
        else res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' }).end('{"error":{"message":"slow down"}}');
        return;
      }
    }
    if (model === 'down') return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"upstream exploded"}}');
    // An error text Postgres cannot store as it is (NUL), as a misbehaving provider may send.
    if (model === 'down-nul') return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"upstream\\u0000exploded"}}');
    if (model === 'unauthorized') return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"message":"bad key"}}');
    if (model === 'reject')
      return void res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"This model does not support that parameter"}}');
    if (model.startsWith('hang')) return;

    const messages = (body.messages as { role: string; content: unknown }[] | undefined) ?? [];
    const afterTool = messages.at(-1)?.role === 'tool';
    const text = model === 'tool' && afterTool ? `Done: ${String(messages.at(-1)?.content)}` : `Echo: ${lastUserText(body)}`;
    const withUsage = model !== 'echo-no-usage';
    const usage = { prompt_tokens: 21, completion_tokens: 9, total_tokens: 30 };
    const tools = (body.tools as { function: { name: string } }[] | undefined) ?? [];
    if (!stream) {
      const message = model === 'tool' && tools.length > 0 && !afterTool
        ? { role: 'assistant', content: null, tool_calls: [{ id: 'call_up_1', type: 'function', function: { name: tools[0].function.name, arguments: '{}' } }] }
        : { role: 'assistant', content: text };
      const out = JSON.stringify({
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message, finish_reason: message.tool_calls ? 'tool_calls' : 'stop' }],
        ...(withUsage ? { usage } : {}),
      });
      res.writeHead(200, { 'content-type': 'application/json' }).end(out);
      return;
    }
    sse();
    res.write(chunk({ role: 'assistant', content: '' }));
    if (model === 'cut' || model === 'error-mid-stream') {
      res.write(chunk({ content: 'Echo: ' }));
      res.write(chunk({ content: 'partial' }));
      if (model === 'cut') setTimeout(() => res.destroy(), 20);
      else res.end(`data: ${JSON.stringify({ error: { message: 'upstream worker crashed', type: 'server_error' } })}\n\n`);
      return;
    }
    if (model === 'slow') {
      let n = 0;
      const timer = setInterval(() => {
        if (res.destroyed || ++n > 1200) {
          clearInterval(timer);
          if (!res.destroyed) res.end('data: [DONE]\n\n');
          return;
        }
        res.write(chunk({ content: `tick ${n} ` }));
      }, 50);
      res.on('close', () => clearInterval(timer));
      return;
    }
    if (model === 'writer') {
      const all = JSON.stringify(messages);
      const dir = /Primary working directory: ([^\s"\\]+)/.exec(all)?.[1] ?? '/tmp';
      const file = /write a file ([\w.-]+)/.exec(lastUserText(body))?.[1] ?? 'hello.txt';
      const writerUsage = { prompt_tokens: 40, completion_tokens: 12, total_tokens: 52 };
      if (afterTool || !tools.some((t) => t.function.name === 'Write')) {
        res.write(chunk({ content: `Wrote ${file}.` }));
        res.write(chunk({}, 'stop'));
      } else {
        const args = JSON.stringify({ file_path: `${dir}/${file}`, content: 'written through the gateway\n' });
        res.write(chunk({ content: `I will write ${file}.` }));
        res.write(chunk({ tool_calls: [{ index: 0, id: 'call_write_1', type: 'function', function: { name: 'Write', arguments: '' } }] }));
        res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(0, 20) } }] }));
        res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(20) } }] }));
        res.write(chunk({}, 'tool_calls'));
      }
      res.write(chunk({}, null, writerUsage));
      res.end('data: [DONE]\n\n');
      return;
    }
    if (model === 'tool' && tools.length > 0 && !afterTool) {
      res.write(chunk({ tool_calls: [{ index: 0, id: 'call_up_1', type: 'function', function: { name: tools[0].function.name, arguments: '' } }] }));
      res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: '{' } }] }));
      res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: '}' } }] }));
      res.write(chunk({}, 'tool_calls'));
      res.write(chunk({}, null, usage));
      res.end('data: [DONE]\n\n');
      return;
    }
    const pieces = text.match(/\S+\s*/g) ?? [text];
    for (const piece of pieces) res.write(chunk({ content: piece }));
    res.write(chunk({}, 'stop'));
    if (withUsage) res.write(chunk({}, null, usage));
    res.end('data: [DONE]\n\n');
  };

  const server = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (raw += c));
    req.on('end', () => {
      try {
        handle(req, res, raw);
      } catch (err) {
        res.writeHead(500).end(String(err));
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
