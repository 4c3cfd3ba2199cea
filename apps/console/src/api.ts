// The one way the console talks to atelier: the public API, same origin, authenticated by the
// session cookie (the browser sends it; no script can read it).

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    /** Seconds, from Retry-After on a 429 or 503. */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

async function failure(res: Response): Promise<ApiFailure> {
  const body = (await res.json().catch(() => undefined)) as { error?: { type?: string; message?: string } } | undefined;
  const retry = Number(res.headers.get('retry-after'));
  return new ApiFailure(res.status, body?.error?.type ?? 'http_error', body?.error?.message ?? `${res.status} ${res.statusText}`, Number.isFinite(retry) && retry > 0 ? retry : undefined);
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw await failure(res);
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

/** A streamed chat completion: calls onText with each piece of the answer as it arrives. */
export async function streamChat(body: Record<string, unknown>, onText: (text: string) => void, signal?: AbortSignal): Promise<void> {
  const res = await fetch('/api/ai/chat/completions', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  });
  if (!res.ok || !res.body) throw await failure(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    const lines = buffer.split('\n');
    buffer = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const chunk = JSON.parse(line.slice(6)) as { choices?: { delta?: { content?: string } }[]; error?: { message: string } };
      if (chunk.error) throw new ApiFailure(502, 'upstream_error', chunk.error.message);
      const text = chunk.choices?.[0]?.delta?.content;
      if (text) onText(text);
    }
  }
}

/** Words for a failed call: what went wrong and, where the API says, what to do. */
export function describeError(err: unknown): string {
  if (!(err instanceof ApiFailure)) return err instanceof Error ? err.message : String(err);
  if (err.status === 429 || err.status === 503) return `${err.message}${err.retryAfter ? ` Retry in ${err.retryAfter} s.` : ''}`;
  if (err.status === 401) return `${err.message} (sign in again)`;
  return err.message;
}
