import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * Aborted when the client goes away before its answer is complete, so the work (a job, an
 * upstream call, a long-poll) is cut; one that is gone already starts no work. `release` stops
 * listening once answered. `keepAliveProbeMs` turns TCP keep-alive probes on for answers that take
 * long (a render), so a client that vanished without closing is noticed.
 */
export function abortWhenGone(req: FastifyRequest, reply: FastifyReply, opts: { keepAliveProbeMs?: number } = {}): { signal: AbortSignal; release(): void } {
  const socket = req.raw.socket as { setKeepAlive?: (enable: boolean, delayMs: number) => void; destroyed?: boolean } | undefined;
  if (opts.keepAliveProbeMs !== undefined) socket?.setKeepAlive?.(true, opts.keepAliveProbeMs);
  const gone = new AbortController();
  const onClose = () => {
    if (!reply.raw.writableFinished) gone.abort();
  };
  reply.raw.on('close', onClose);
  if (socket?.destroyed === true) gone.abort();
  return { signal: gone.signal, release: () => reply.raw.off('close', onClose) };
}
