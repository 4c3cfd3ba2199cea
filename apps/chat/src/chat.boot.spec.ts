import { createService } from '@atelier/runtime';
import { bootHealthyAndClose, createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { ChatModule } from './chat.module';

describe('chat service', () => {
  let env: TestEnvironment;
  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
  });
  afterAll(() => env?.cleanup());

  it('boots, reports healthy, and closes without leaving connections open', async () => {
    await bootHealthyAndClose(() => createService(ChatModule.forRoot(env.config), env.config, { service: 'chat' }), 'chat');
  });
});
