import { createService } from '@atelier/runtime';
import { bootHealthyAndClose, createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { FineTuneModule } from './fine-tune.module';

describe('fine-tune service', () => {
  let env: TestEnvironment;
  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
  });
  afterAll(() => env?.cleanup());

  it('boots, reports healthy, and closes without leaving connections open', async () => {
    await bootHealthyAndClose(() => createService(FineTuneModule.forRoot(env.config), env.config, { service: 'fine-tune' }), 'fine-tune');
  });
});
