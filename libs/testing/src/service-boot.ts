import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { AppConfig } from '@atelier/config';
import { createTestEnvironment, type TestEnvironment } from './test-infrastructure';
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

/**
 * Every app's boot spec: the app (as its main.ts starts it) boots on a fresh database and Redis prefix, reports
 * healthy under its name and closes without leaving a connection open. Each app calls it from its
 * own `<app>.boot.spec.ts`, so `nx affected` runs it for the apps a change reaches.
 */
export function describeServiceBoot(service: string, start: (config: AppConfig) => Promise<NestFastifyApplication>): void {
  describe(`${service} service`, () => {
    let env: TestEnvironment;
    beforeAll(async () => {
      env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
    });
    afterAll(() => env?.cleanup());

    it('boots, reports healthy, and closes without leaving connections open', async () => {
      await bootHealthyAndClose(() => start(env.config), service);
    });
  });
}
