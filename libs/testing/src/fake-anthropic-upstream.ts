import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A real HTTP server speaking Anthropic's Messages API (`POST /v1/messages`), for tests of the
 * `anthropic` engine. What it does is chosen by the model name in the body:
 *
 * - `claude-echo`: answers "Native: <last user text>", usage input 30, output 6, cache writes 4, cache reads 10;
 * - `claude-tool`: calls the first declared tool with `{"city": "Oslo"}`; after a tool_result, "Done: <its content>";
 * - `claude-writer`: Claude Code's turn, scripted as the chat `writer` upstream: a sentence and a Write call of
 *   `<the Primary working directory>/<the file asked for>`; after the tool_result, "Wrote <file>.";
 * - `claude-overloaded`: 529 overloaded_error, always.
 *
 * Streamed answers are Anthropic's events, in its order, with a ping. Requests must carry
 * `x-api-key: <apiKey>`; each is recorded with its anthropic-version and anthropic-beta headers.
 */
export interface FakeAnthropicRequest {
  model: string;
  body: Record<string, unknown>;
  version?: string;
  beta?: string;
}

export interface FakeAnthropicUpstream {
  url: string;
  requests: FakeAnthropicRequest[];
  close(): Promise<void>;
}

type Block = Record<string, unknown> & { type: string };

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Block[]).map((b) => (b.type === 'text' ? String(b.text) : b.type === 'tool_result' ? textOf(b.content) : '')).join(' ');
}

export async function startFakeAnthropicUpstream(opts: { apiKey: string }): Promise<FakeAnthropicUpstream> {
  const requests: FakeAnthropicRequest[] = [];
  let n = 0;

  const answer = (body: Record<string, unknown>): { content: Block[]; stop_reason: string } => {
    const model = String(body.model);
    const messages = (body.messages as { role: string; content: unknown }[] | undefined) ?? [];
    const last = messages.at(-1);
    const result = Array.isArray(last?.content) ? (last.content as Block[]).find((b) => b.type === 'tool_result') : undefined;
    const tools = (body.tools as { name: string }[] | undefined) ?? [];
    if (model === 'claude-writer') {
      const file = /write a file ([\w.-]+)/.exec(textOf(messages.filter((m) => m.role === 'user').at(0)?.content))?.[1] ?? 'hello.txt';
      if (result || !tools.some((t) => t.name === 'Write')) return { content: [{ type: 'text', text: `Wrote ${file}.` }], stop_reason: 'end_turn' };
      const dir = /Primary working directory: ([^\s"\\]+)/.exec(JSON.stringify(body))?.[1] ?? '/tmp';
      return {
        content: [
          { type: 'text', text: `I will write ${file}.` },
          { type: 'tool_use', id: 'toolu_native_1', name: 'Write', input: { file_path: `${dir}/${file}`, content: 'written through the native upstream\n' } },
        ],
        stop_reason: 'tool_use',
      };
    }
    if (model === 'claude-tool' && !result && tools.length > 0)
      return { content: [{ type: 'tool_use', id: 'toolu_native_1', name: tools[0].name, input: { city: 'Oslo' } }], stop_reason: 'tool_use' };
    const text = result ? `Done: ${textOf(result.content)}` : `Native: ${textOf(messages.filter((m) => m.role === 'user').at(-1)?.content)}`;
    return { content: [{ type: 'text', text }], stop_reason: 'end_turn' };
  };

  const usage = { input_tokens: 30, output_tokens: 6, cache_creation_input_tokens: 4, cache_read_input_tokens: 10 };

  const handle = (req: IncomingMessage, res: ServerResponse, raw: string) => {
    if (req.method !== 'POST' || !req.url?.endsWith('/messages')) return void res.writeHead(404).end();
    if (req.headers['x-api-key'] !== opts.apiKey)
      return void res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }));
    const body = JSON.parse(raw) as Record<string, unknown>;
    const model = String(body.model);
    requests.push({ model, body, version: req.headers['anthropic-version'] as string | undefined, beta: req.headers['anthropic-beta'] as string | undefined });
    if (model === 'claude-overloaded')
      return void res.writeHead(529, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
    const { content, stop_reason } = answer(body);
    const id = `msg_native_${++n}`;
    if (body.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id, type: 'message', role: 'assistant', model, content, stop_reason, stop_sequence: null, usage }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (event: Record<string, unknown>) => res.write(`event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`);
    send({ type: 'message_start', message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
    send({ type: 'ping' });
    content.forEach((block, index) => {
      if (block.type === 'text') {
        send({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
        for (const piece of String(block.text).match(/\S+\s*/g) ?? []) send({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } });
      } else {
        send({ type: 'content_block_start', index, content_block: { ...block, input: {} } });
        const json = JSON.stringify(block.input);
        send({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: json.slice(0, 10) } });
        send({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: json.slice(10) } });
      }
      send({ type: 'content_block_stop', index });
    });
    send({ type: 'message_delta', delta: { stop_reason, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } });
    send({ type: 'message_stop' });
    res.end();
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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
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
