import { createService } from '@atelier/runtime';
import { bootHealthyAndClose, createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { EventsModule } from './events.module';

describe('events service', () => {
  let env: TestEnvironment;
  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
  });
  afterAll(() => env?.cleanup());

  it('boots, reports healthy, and closes without leaving connections open', async () => {
    await bootHealthyAndClose(() => createService(EventsModule.forRoot(env.config), env.config, { service: 'events' }), 'events');
  });
});
