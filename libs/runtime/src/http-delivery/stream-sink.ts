import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** Where one event stream's text goes: its socket once the HTTP layer let go of it, else its response. */
export interface StreamSink {
  write(text: string): void;
  /** Bytes accepted and not yet handed to the kernel (a client that stops reading makes it grow). */
  readonly backlog: number;
  /** Ends the response completely (its terminating chunk after `last`), then the connection. */
  end(last: string): void;
  /** Drops the connection at once. */
  destroy(): void;
}

interface HttpParser {
  incoming?: unknown;
}

/** The properties Node's HTTP server (Node 24's _http_server.js) puts on each socket it parses. */
type ParsedSocket = Socket & { parser?: HttpParser | null; _httpMessage?: unknown };

/**
 * The listeners Node's HTTP server adds to a connection it parses, by their function names. It
 * removes these same ones when it hands a socket over on `upgrade`; an idle event stream needs
 * them no more than a WebSocket does.
 */
const HTTP_SOCKET_LISTENERS: readonly (readonly [string, string])[] = [
  ['data', 'bound socketOnData'],
  ['end', 'bound socketOnEnd'],
  ['close', 'bound socketOnClose'],
  ['drain', 'bound socketOnDrain'],
  ['error', 'socketOnError'],
  ['timeout', 'socketOnTimeout'],
  ['resume', 'onSocketResume'],
  ['pause', 'onSocketPause'],
];

/** Node's own parser release (what its `upgrade` path calls), when this Node still exports it; looked up once. */
const freeParser = ((): ((parser: HttpParser, req: unknown, socket: Socket) => void) | undefined => {
  const common = process.getBuiltinModule('_http_common') as { freeParser?: (parser: HttpParser, req: unknown, socket: Socket) => void } | undefined;
  return typeof common?.freeParser === 'function' ? common.freeParser : undefined;
})();

/**
 * Takes an event stream's socket out of Node's HTTP server once its head is sent, as the server
 * does itself for a WebSocket upgrade: the request, the response, the parser and the framework's
 * request objects then go, and only the socket stays. An idle stream held about 9.8 KB of
 * JavaScript heap through them (a heap snapshot at 3,000 streams), where the socket alone is 1.1
 * KB; docs/benchmarks.md has the resident memory per stream before and after. Returns undefined,
 * leaving everything as it was, when the connection is not exactly what this expects (a Node
 * whose HTTP internals differ, HTTP/1.0, a head not sent in chunks): the stream then stays on
 * its response.
 */
function detachSocket(res: ServerResponse): Socket | undefined {
  const socket = res.socket as ParsedSocket | null;
  const parser = socket?.parser;
  if (!socket || !parser || parser.incoming !== res.req || socket._httpMessage !== res || !freeParser) return undefined;
  if (res.req.httpVersion !== '1.1' || !res.headersSent || !(res as ServerResponse & { chunkedEncoding?: boolean }).chunkedEncoding) return undefined;
  const found = HTTP_SOCKET_LISTENERS.map(([event, name]) => [event, socket.listeners(event).find((fn) => fn.name === name)] as const);
  if (found.some(([, fn]) => fn === undefined)) return undefined;
  for (const [event, fn] of found) socket.removeListener(event, fn as (...args: unknown[]) => void);
  // Hands the socket's reads back from the parser to the stream (unconsume), and the parser back to Node's pool.
  freeParser(parser, res.req, socket);
  res.detachSocket(socket);
  return socket;
}

/** Frames text as one HTTP/1.1 chunk. */
function chunk(text: string): string {
  return `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
}

/** Most bytes a client may send up an event stream (it has nothing to say); past it, it is cut off. */
const MAX_CLIENT_BYTES = 64 * 1024;

/**
 * Sends an event stream's head on `res` and returns where its frames go from then on. `onClose`
 * runs once, when the connection ends for whatever reason. Creates no closure itself: one here
 * would keep `res`, and all the request state behind it, alive for as long as the stream.
 */
export function openStreamSink(res: ServerResponse, headers: Record<string, string>, onClose: () => void): StreamSink {
  res.writeHead(200, headers);
  res.flushHeaders();
  const socket = detachSocket(res);
  if (!socket) return responseSink(res, once(onClose));
  // The response was the one listener that told the framework the request is over (access log,
  // request duration): that is now, when the stream is established.
  res.emit('close');
  return socketSink(socket, once(onClose));
}

function once(fn: () => void): () => void {
  let called = false;
  return () => {
    if (called) return;
    called = true;
    fn();
  };
}

function responseSink(res: ServerResponse, close: () => void): StreamSink {
  res.on('close', close);
  res.on('error', close);
  return {
    write: (text) => void res.write(text),
    get backlog() {
      return res.writableLength;
    },
    end: (last) => {
      if (!res.writableEnded) res.end(last);
    },
    destroy: () => void res.destroy(),
  };
}

function socketSink(socket: Socket, close: () => void): StreamSink {
  socket.on('close', close);
  socket.on('error', () => socket.destroy());
  // Read on, so a client that goes away is noticed at once, not at the next keep-alive.
  let received = 0;
  socket.on('data', (data: Buffer) => {
    received += data.length;
    if (received > MAX_CLIENT_BYTES) socket.destroy();
  });
  socket.on('end', () => socket.destroy());
  return {
    write: (text) => void socket.write(chunk(text)),
    get backlog() {
      return socket.writableLength;
    },
    end: (last) => {
      if (socket.destroyed || socket.writableEnded) return;
      socket.write(chunk(last));
      socket.end('0\r\n\r\n');
      socket.destroySoon();
    },
    destroy: () => void socket.destroy(),
  };
}
