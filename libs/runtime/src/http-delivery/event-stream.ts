import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * The head of every event stream atelier sends (chat, Responses, the events route): no caching or
 * transforming proxy in between (a compressing one would hold events back), and no buffering by
 * nginx (`x-accel-buffering`).
 */
export const EVENT_STREAM_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/**
 * One server-sent event. `id` goes last: SSE reads fields in any order, and clients that parse
 * frames by hand see the `event:` line first, then `data:`. `data` is one line (JSON).
 */
export function sseFrame(data: string, event?: string, id?: string): string {
  return `${event !== undefined ? `event: ${event}\n` : ''}data: ${data}\n${id !== undefined ? `id: ${id}\n` : ''}\n`;
}

/**
 * Takes the reply over from Fastify and writes an event stream's head, with the headers set so far
 * (rate-limit figures). Called with the first event, so a refusal before it is an ordinary HTTP
 * error. Once open, it does nothing.
 */
export function openEventStream(req: FastifyRequest, reply: FastifyReply, headers: Record<string, string>): void {
  if (reply.sent) return;
  reply.hijack();
  reply.raw.writeHead(200, { ...headers, ...EVENT_STREAM_HEADERS, 'x-request-id': req.id });
}
