import http from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { waitFor } from '@atelier/testing';
import { openStreamSink, type StreamSink } from './stream-sink';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const HEAD = { 'content-type': 'text/event-stream; charset=utf-8', connection: 'keep-alive' };

/** A real HTTP server whose every request becomes an event stream; what it opened is kept here. */
async function streamServer() {
  const opened: { sink: StreamSink; closes: number; released: { req: WeakRef<object>; res: WeakRef<object> }; parserLeft: boolean }[] = [];
  const server = http.createServer((req, res) => {
    const entry = { sink: undefined as unknown as StreamSink, closes: 0, released: { req: new WeakRef(req), res: new WeakRef(res) }, parserLeft: false };
    const socket = res.socket as (typeof res.socket & { parser?: unknown }) | null;
    entry.sink = openStreamSink(res, HEAD, () => entry.closes++);
    entry.parserLeft = socket?.parser === null;
    opened.push(entry);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, opened, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/events` };
}

function get(url: string): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => http.get(url, { agent: false }, resolve).on('error', reject));
}

describe('event stream sink', () => {
  let s: Awaited<ReturnType<typeof streamServer>>;
  beforeEach(async () => {
    s = await streamServer();
  });
  afterEach(async () => {
    s.server.closeAllConnections();
    await new Promise((r) => s.server.close(r));
  });

  it('takes the socket from the HTTP server: the request, the response and the parser are let go while the stream stays open', async () => {
    const res = await get(s.url);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    const [entry] = s.opened;
    expect(entry.parserLeft).toBe(true);
    await waitFor(
      () => {
        gc();
        return entry.released.req.deref() === undefined && entry.released.res.deref() === undefined;
      },
      { timeoutMs: 5000, description: 'the request and response to be collected' },
    );
    // The stream still works after they are gone.
    let body = '';
    res.on('data', (d: Buffer) => (body += d.toString()));
    entry.sink.write('event: x\ndata: {"é":1}\n\n');
    await waitFor(() => body.includes('data: {"é":1}'), { description: 'the frame' });
    res.destroy();
  });

  it('ends with a complete chunked response the client reads to its end, and reports the close once', async () => {
    const res = await get(s.url);
    let body = '';
    res.on('data', (d: Buffer) => (body += d.toString()));
    const ended = new Promise<string>((resolve) => {
      res.on('end', () => resolve('end'));
      res.on('error', () => resolve('error'));
    });
    s.opened[0].sink.write(': keep-alive\n\n');
    s.opened[0].sink.end('retry: 1000\n\n');
    expect(await ended).toBe('end');
    expect(body).toBe(': keep-alive\n\nretry: 1000\n\n');
    await waitFor(() => s.opened[0].closes === 1, { description: 'the close' });
    s.opened[0].sink.end('again');
    expect(s.opened[0].closes).toBe(1);
  });

  it('notices a client that goes away without any write to it', async () => {
    const res = await get(s.url);
    res.destroy();
    await waitFor(() => s.opened[0].closes === 1, { description: 'the close' });
  });

  it('cuts off a client that sends more than 64 KiB up the stream', async () => {
    const req = http.request(s.url, { agent: false, method: 'GET' });
    const res = await new Promise<http.IncomingMessage>((resolve) => req.on('response', resolve).end());
    expect(res.statusCode).toBe(200);
    const socket = res.socket;
    socket.on('error', () => undefined);
    socket.write(Buffer.alloc(100 * 1024, 'x'));
    await waitFor(() => s.opened[0].closes === 1, { description: 'the close' });
  });
});
