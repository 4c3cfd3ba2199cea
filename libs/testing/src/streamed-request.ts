import http from 'node:http';

export interface StreamedAnswer {
  /** 0 when the server closed the connection without an answer. */
  status: number;
  contentType: string | null;
  text: string;
  /** Body bytes the client had written when the answer (or the close) came. */
  sent: number;
}

/**
 * Sends a request whose body is written piece by piece, with backpressure and an optional pause
 * between pieces (a slow client), and stops writing once the server answers: a client that
 * uploads hundreds of MB holds one piece at a time, and a refusal mid-body ends the upload as
 * it would for a real client. Resolves with the answer, or status 0 if the server closed first.
 */
export function streamedRequest(
  url: string,
  opts: { method: string; headers: Record<string, string>; body: Iterable<Buffer | string>; pauseMs?: number; timeoutMs?: number },
): Promise<StreamedAnswer> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let done = false;
    const finish = (answer: Omit<StreamedAnswer, 'sent'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.destroy();
      resolve({ ...answer, sent });
    };
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      req.destroy();
      reject(new Error(`${opts.method} ${url}: no answer within ${opts.timeoutMs ?? 60_000} ms (${sent} bytes sent)`));
    }, opts.timeoutMs ?? 60_000);
    const req = http.request(url, { method: opts.method, headers: opts.headers });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => finish({ status: res.statusCode ?? 0, contentType: (res.headers['content-type'] as string | undefined) ?? null, text }));
      res.on('error', () => finish({ status: res.statusCode ?? 0, contentType: (res.headers['content-type'] as string | undefined) ?? null, text }));
    });
    // A reset while writing: the server refused and closed; an answer may still be on its way.
    req.on('error', () => setTimeout(() => finish({ status: 0, contentType: null, text: '' }), 200));
    void (async () => {
      for (const piece of opts.body) {
        if (done || req.destroyed) return;
        sent += Buffer.byteLength(piece);
        if (!req.write(piece)) await new Promise<void>((r) => (req.once('drain', () => r()), req.once('close', () => r())));
        if (opts.pauseMs) await new Promise((r) => setTimeout(r, opts.pauseMs));
      }
      if (!done && !req.destroyed) req.end();
    })().catch(() => undefined);
  });
}
