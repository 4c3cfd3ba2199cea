import { createService } from '@atelier/runtime';
import { bootHealthyAndClose, createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { QueueWorkerModule } from './queue-worker.module';

describe('queue-worker service', () => {
  let env: TestEnvironment;
  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
  });
  afterAll(() => env?.cleanup());

  it('boots, reports healthy, and closes without leaving connections open', async () => {
    await bootHealthyAndClose(() => createService(QueueWorkerModule.forRoot(env.config), env.config, { service: 'queue-worker' }), 'queue-worker');
  });
});
