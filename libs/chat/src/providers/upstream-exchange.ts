import { STATUS_CODES } from 'node:http';
import type { Agent, Dispatcher } from 'undici';
import { retryAfterMs } from '@atelier/runtime';

/** One HTTP exchange with an upstream: undici's dispatch for whole answers, and what an answer says. */

/** An upstream's answer as undici gives it: the body must be read to its end or destroyed. */
export type UpstreamResponse = Dispatcher.ResponseData;

export function header(headers: UpstreamResponse['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function retryAfter(headers: UpstreamResponse['headers']): number | undefined {
  return retryAfterMs(header(headers, 'retry-after'));
}

/** A whole non-streamed answer: what dispatchBuffered resolves with. */
export interface BufferedAnswer {
  statusCode: number;
  headers: UpstreamResponse['headers'];
  text: string;
}

/** The answer's body failed after its headers had arrived. */
export class CutOff extends Error {}

/**
 * One call through undici's dispatch API, its body collected by the handler. undici's request()
 * wraps every response in a Readable stream, an AsyncResource and several promises: besides
 * their CPU (18-19 against 14 us per call in a closed loop against a local server), about a
 * quarter of what request() allocates outlives young-generation collections and is promoted
 * (none here), which made the chat service's scavenges and mark-compacts longer. `onHeaders`
 * runs when the response headers arrive.
 */
export function dispatchBuffered(agent: Agent, opts: Dispatcher.DispatchOptions, signal: AbortSignal, onHeaders: () => void): Promise<BufferedAnswer> {
  return new Promise((resolve, reject) => {
    let controller: Dispatcher.DispatchController | undefined;
    let answer: Omit<BufferedAnswer, 'text'> | undefined;
    const chunks: Buffer[] = [];
    const onAbort = () => controller?.abort(signal.reason);
    const settle = (err?: Error) => {
      signal.removeEventListener('abort', onAbort);
      if (err) reject(answer ? new CutOff(err.message) : err);
      else resolve({ ...answer!, text: chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8') });
    };
    signal.addEventListener('abort', onAbort, { once: true });
    agent.dispatch(opts, {
      onRequestStart(c) {
        controller = c;
        if (signal.aborted) c.abort(signal.reason);
      },
      onResponseStart(_c, statusCode, headers) {
        if (statusCode < 200) return;
        answer = { statusCode, headers };
        onHeaders();
      },
      onResponseData(_c, chunk) {
        chunks.push(chunk);
      },
      onResponseEnd() {
        settle();
      },
      onResponseError(_c, err) {
        settle(err);
      },
    });
  });
}

export function messageOf(text: string, statusCode: number): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const msg = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message);
    if (typeof msg === 'string' && msg) return msg.slice(0, 500);
  } catch {
    // not JSON: fall through to the raw text
  }
  // undici does not pass on the status line's text; the standard phrase stands in for it.
  return text.slice(0, 200) || STATUS_CODES[statusCode] || `HTTP ${statusCode}`;
}

export async function upstreamMessage(res: UpstreamResponse): Promise<string> {
  return messageOf(await res.body.text().catch(() => ''), res.statusCode);
}
