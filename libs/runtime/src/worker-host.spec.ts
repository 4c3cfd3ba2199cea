import { Module, type DynamicModule, type Type } from '@nestjs/common';
import { defineQueue, type QueueContract, type QueueSettings } from '@atelier/contracts';
import { createTestEnvironment, TestHttp, type TestEnvironment } from '@atelier/testing';
import { createService } from './bootstrap-service';
import { HandlesQueue, type JobHandler } from './job-handler';
import { ServiceRuntimeModule } from './service-runtime.module';
import { HandlerWiringError, matchHandlers } from './worker-host.service';

const SETTINGS: QueueSettings = {
  kind: 'work',
  attempts: 1,
  backoff: { type: 'fixed', delay: 0 },
  concurrency: 1,
  removeOnComplete: { count: 10, age: 60 },
  removeOnFail: { count: 10, age: 60 },
  lockDurationMs: 5_000,
};

const ALPHA_QUEUE = defineQueue<{ n: number }, number>()('test-alpha', SETTINGS);
const BETA_QUEUE = defineQueue<{ n: number }, number>()('test-beta', SETTINGS);

@HandlesQueue(ALPHA_QUEUE)
class AlphaHandler implements JobHandler<typeof ALPHA_QUEUE> {
  async handle(payload: { n: number }): Promise<number> {
    return payload.n;
  }
}

@HandlesQueue(ALPHA_QUEUE)
class SecondAlphaHandler implements JobHandler<typeof ALPHA_QUEUE> {
  async handle(payload: { n: number }): Promise<number> {
    return payload.n * 2;
  }
}

@HandlesQueue(BETA_QUEUE)
class BetaHandler implements JobHandler<typeof BETA_QUEUE> {
  async handle(payload: { n: number }): Promise<number> {
    return payload.n;
  }
}

describe('WorkerHost handler wiring at start-up', () => {
  let env: TestEnvironment;

  beforeAll(async () => {
    env = await createTestEnvironment();
  });
  afterAll(() => env?.cleanup());

  function appModule(consumes: QueueContract[], providers: Type<unknown>[]): DynamicModule {
    @Module({})
    class WiringTestModule {}
    return {
      module: WiringTestModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'wiring-test', config: env.config, consumes })],
      providers,
    };
  }

  async function startupError(consumes: QueueContract[], providers: Type<unknown>[]): Promise<Error> {
    const started = createService(appModule(consumes, providers), env.config, { service: 'wiring-test' });
    await expect(started).rejects.toBeInstanceOf(HandlerWiringError);
    return started.catch((err: Error) => err) as Promise<Error>;
  }

  it('refuses to start when a consumed queue has no handler, naming the queue', async () => {
    const err = await startupError([ALPHA_QUEUE, BETA_QUEUE], [AlphaHandler]);
    expect(err.message).toContain('"test-beta"');
    expect(err.message).toMatch(/no @HandlesQueue handler/);
    expect(err.message).not.toContain('"test-alpha"');
  });

  it('refuses to start when one queue has two handlers, naming both classes', async () => {
    const err = await startupError([ALPHA_QUEUE], [AlphaHandler, SecondAlphaHandler]);
    expect(err.message).toContain('"test-alpha"');
    expect(err.message).toContain('AlphaHandler');
    expect(err.message).toContain('SecondAlphaHandler');
  });

  it('refuses to start when a handler exists for a queue the app does not consume', async () => {
    const err = await startupError([ALPHA_QUEUE], [AlphaHandler, BetaHandler]);
    expect(err.message).toContain('BetaHandler');
    expect(err.message).toContain('"test-beta"');
    expect(err.message).toMatch(/not in this app's consumes list/);
  });

  it('starts and serves health when every consumed queue has exactly one handler', async () => {
    const app = await createService(appModule([ALPHA_QUEUE, BETA_QUEUE], [AlphaHandler, BetaHandler]), env.config, {
      service: 'wiring-test',
    });
    try {
      const res = await new TestHttp(app).request('GET', '/health');
      expect(res.status).toBe(200);
    } finally {
      await app.close();
    }
  });
});

describe('matchHandlers', () => {
  const h = (contract: QueueContract, className: string) => ({ contract, instance: { className }, className });

  it('maps each consumed queue to its one handler instance', () => {
    const alpha = h(ALPHA_QUEUE, 'AlphaHandler');
    const beta = h(BETA_QUEUE, 'BetaHandler');
    const matched = matchHandlers([ALPHA_QUEUE, BETA_QUEUE], [alpha, beta]);
    expect([...matched.keys()].sort()).toEqual(['test-alpha', 'test-beta']);
    expect(matched.get('test-alpha')).toBe(alpha.instance);
    expect(matched.get('test-beta')).toBe(beta.instance);
  });

  it('accepts an app that consumes nothing and has no handlers', () => {
    expect(matchHandlers([], []).size).toBe(0);
  });

  it('lists every problem at once, not just the first', () => {
    let err: Error | undefined;
    try {
      // alpha: two handlers; beta: none; gamma: handler but not consumed.
      const gamma = defineQueue<unknown>()('test-gamma', SETTINGS);
      matchHandlers([ALPHA_QUEUE, BETA_QUEUE], [h(ALPHA_QUEUE, 'A1'), h(ALPHA_QUEUE, 'A2'), h(gamma, 'G')]);
    } catch (e) {
      err = e as Error;
    }
    expect(err).toBeInstanceOf(HandlerWiringError);
    const lines = err!.message.split('\n').filter((l) => l.trim().startsWith('- '));
    expect(lines).toHaveLength(3);
    expect(err!.message).toMatch(/"test-alpha" has 2 handlers \(A1, A2\)/);
    expect(err!.message).toMatch(/"test-beta" is consumed but has no @HandlesQueue handler/);
    expect(err!.message).toMatch(/handler G for queue "test-gamma" is not in this app's consumes list/);
  });
});
