import { createService } from '@atelier/runtime';
import { createTestEnvironment, TestHttp, waitFor, type TestEnvironment } from '@atelier/testing';
import { MediaModule } from './media.module';

const sockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

describe('media service', () => {
  let env: TestEnvironment;
  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
  });
  afterAll(() => env?.cleanup());

  it('boots, reports healthy, and closes without leaving connections open', async () => {
    const before = sockets();
    const app = await createService(MediaModule.forRoot(env.config), env.config, { service: 'media' });
    const res = await new TestHttp(app).request('GET', '/health');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok', service: 'media', checks: { postgres: { status: 'up' }, redis: { status: 'up' } } });
    await app.close();
    // Every Redis and Postgres connection the app opened is gone (a leak keeps Jest alive).
    await waitFor(() => sockets() <= before, { timeoutMs: 2000, description: 'the app to close its connections' });
  });
});
