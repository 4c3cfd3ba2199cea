import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { TestHttp } from './http-client';
import { waitFor } from './wait-for';

const tcpSockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

/**
 * Boots an app (as its main.ts would, via `start`), checks it reports healthy under its own
 * name, and closes it, requiring every Redis/Postgres connection it opened to be gone (a leak
 * would keep a pod from exiting on SIGTERM).
 */
export async function bootHealthyAndClose(start: () => Promise<NestFastifyApplication>, service: string): Promise<void> {
  const before = tcpSockets();
  const app = await start();
  const res = await new TestHttp(app).request('GET', '/health');
  if (res.status !== 200) throw new Error(`${service} /health answered ${res.status}: ${res.text}`);
  const body = res.body as { status?: string; service?: string; checks?: Record<string, { status: string }> };
  if (body.status !== 'ok' || body.service !== service || body.checks?.postgres?.status !== 'up' || body.checks?.redis?.status !== 'up')
    throw new Error(`${service} /health body is wrong: ${res.text}`);
  await app.close();
  await waitFor(() => tcpSockets() <= before, { timeoutMs: 2000, description: `${service} to close its connections` });
}
