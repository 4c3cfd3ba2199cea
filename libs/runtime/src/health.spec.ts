import { Module, type DynamicModule } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { parseConfig, type AppConfig } from '@atelier/config';
import { defineQueue, type HealthResponse } from '@atelier/contracts';
import { createTestEnvironment, TestHttp, type TestEnvironment } from '@atelier/testing';
import { createService } from './bootstrap-service';
import { HandlesQueue, type JobHandler } from './job-handler';
import { ServiceRuntimeModule } from './service-runtime.module';

const PING_QUEUE = defineQueue<{ n: number }, number>()('health-test-ping', {
  kind: 'rpc',
  attempts: 1,
  backoff: { type: 'fixed', delay: 0 },
  concurrency: 1,
  removeOnComplete: { count: 10, age: 60 },
  removeOnFail: { count: 10, age: 60 },
  lockDurationMs: 5_000,
});

@HandlesQueue(PING_QUEUE)
class PingHandler implements JobHandler<typeof PING_QUEUE> {
  async handle(payload: { n: number }): Promise<number> {
    return payload.n;
  }
}

/** A bare service, or (consumer) one that also runs a BullMQ worker and cancel subscription. */
function healthModule(config: AppConfig, consumer: boolean): DynamicModule {
  @Module({})
  class HealthTestModule {}
  return {
    module: HealthTestModule,
    imports: [ServiceRuntimeModule.forRoot({ service: 'health-test', config, consumes: consumer ? [PING_QUEUE] : [] })],
    providers: consumer ? [PingHandler] : [],
  };
}

describe('GET /health', () => {
  let env: TestEnvironment;
  const apps: NestFastifyApplication[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment();
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await env?.cleanup();
  });

  async function start(overrides: Partial<Record<keyof AppConfig, string>> = {}, consumer = false): Promise<TestHttp> {
    const app = await boot(overrides, consumer);
    apps.push(app);
    return new TestHttp(app);
  }

  async function boot(overrides: Partial<Record<keyof AppConfig, string>>, consumer: boolean): Promise<NestFastifyApplication> {
    // Re-parse so overrides go through the same validation as production config.
    const config = parseConfig({
      NODE_ENV: 'test',
      DATABASE_URL: env.config.DATABASE_URL,
      REDIS_URL: env.config.REDIS_URL,
      REDIS_PREFIX: env.config.REDIS_PREFIX,
      LOG_LEVEL: 'silent',
      ...overrides,
    });
    return createService(healthModule(config, consumer), config, { service: 'health-test' });
  }

  it('is 200 with postgres and redis up when both answer', async () => {
    const http = await start();
    const res = await http.request<HealthResponse>('GET', '/health');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      status: 'ok',
      service: 'health-test',
      checks: {
        postgres: { status: 'up', latency_ms: expect.any(Number) },
        redis: { status: 'up', latency_ms: expect.any(Number) },
      },
    });
  });

  it('starts without Redis and answers 503 with redis down, promptly', async () => {
    const http = await start({ REDIS_URL: 'redis://127.0.0.1:1' });
    const started = Date.now();
    const res = await http.request<HealthResponse>('GET', '/health');
    // The checks are bounded by a 2 s timeout; a hung probe would be worse than a failing one.
    expect(Date.now() - started).toBeLessThan(4000);
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({
      status: 'error',
      service: 'health-test',
      checks: { postgres: { status: 'up' }, redis: { status: 'down', error: expect.any(String) } },
    });
  });

  it('starts a queue-consuming service without Redis, reports 503, and still shuts down promptly', async () => {
    // Workers and the cancel-jobs subscription must not turn "Redis is down" into a crash loop.
    const app = await boot({ REDIS_URL: 'redis://127.0.0.1:1' }, true);
    let res;
    try {
      res = await new TestHttp(app).request<HealthResponse>('GET', '/health');
    } finally {
      const started = Date.now();
      await app.close();
      // Far below SHUTDOWN_TIMEOUT_MS (25 s): there is nothing to drain without Redis.
      expect(Date.now() - started).toBeLessThan(3000);
    }
    expect(res.status).toBe(503);
    expect(res.body.checks.redis).toMatchObject({ status: 'down' });
    expect(res.body.checks.postgres).toMatchObject({ status: 'up' });
  });

  it('starts without its database and answers 503 with postgres down', async () => {
    const missing = new URL(env.databaseUrl);
    missing.pathname = `/atelier_missing_${Date.now().toString(36)}`;
    const http = await start({ DATABASE_URL: missing.toString() });
    const started = Date.now();
    const res = await http.request<HealthResponse>('GET', '/health');
    expect(Date.now() - started).toBeLessThan(4000);
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({
      status: 'error',
      checks: { postgres: { status: 'down', error: expect.any(String) }, redis: { status: 'up' } },
    });
  });
});
