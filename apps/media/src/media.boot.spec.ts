import { createService } from '@atelier/runtime';
import { bootHealthyAndClose, createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { MediaModule } from './media.module';

describe('media service', () => {
  let env: TestEnvironment;
  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
  });
  afterAll(() => env?.cleanup());

  it('boots, reports healthy, and closes without leaving connections open', async () => {
    await bootHealthyAndClose(() => createService(MediaModule.forRoot(env.config), env.config, { service: 'media' }), 'media');
  });
});
