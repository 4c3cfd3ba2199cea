import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * Aborted when the client goes away before its answer is complete, so the job (and the upstream
 * call) is cut; one that is gone already starts no work. `release` stops listening once answered.
 */
export function abortWhenGone(req: FastifyRequest, reply: FastifyReply): { signal: AbortSignal; release(): void } {
  const gone = new AbortController();
  const onClose = () => {
    if (!reply.raw.writableFinished) gone.abort();
  };
  reply.raw.on('close', onClose);
  if (req.raw.socket?.destroyed === true) gone.abort();
  return { signal: gone.signal, release: () => reply.raw.off('close', onClose) };
}

/**
 * Takes the reply over from Fastify and writes an event stream's head, with the headers set so far
 * (rate-limit figures). Called with the first event, so a refusal before it is an ordinary HTTP error.
 */
export function openEventStream(req: FastifyRequest, reply: FastifyReply, headers: Record<string, string>): void {
  if (reply.sent) return;
  reply.hijack();
  reply.raw.writeHead(200, {
    ...headers,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    'x-request-id': req.id,
  });
}
