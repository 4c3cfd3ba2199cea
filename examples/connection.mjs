// Where the examples find atelier: ATELIER_BASE_URL (default http://localhost:8080, what
// `npm start` prints) and ATELIER_API_KEY (default: the demo key `npm start` writes to
// var/demo-api-key).
import { readFileSync } from 'node:fs';

export const baseUrl = (process.env.ATELIER_BASE_URL ?? 'http://localhost:8080').replace(/\/$/, '');

function demoKey() {
  try {
    return readFileSync(new URL('../var/demo-api-key', import.meta.url), 'utf8').trim();
  } catch {
    return undefined;
  }
}

export const apiKey = process.env.ATELIER_API_KEY ?? demoKey();
if (!apiKey) {
  console.error('No API key: run `npm start` first (it writes var/demo-api-key), or set ATELIER_API_KEY.');
  process.exit(1);
}

/** An authenticated JSON call; throws with the error envelope's message on a non-2xx answer. */
export async function api(method, path, body) {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await res.json();
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${answer.error?.message ?? JSON.stringify(answer)}`);
  return answer;
}
