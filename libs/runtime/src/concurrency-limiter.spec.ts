import { Module } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { createTestEnvironment, waitFor, type TestEnvironment } from '@atelier/testing';
import { createService } from './bootstrap-service';
import { ConcurrencyLimiter } from './concurrency-limiter.service';
import { ServiceRuntimeModule } from './service-runtime.module';

/** max_concurrent slots in Redis, shared by every process using the same Redis and prefix. */
describe('ConcurrencyLimiter', () => {
  let env: TestEnvironment;
  const apps: NestFastifyApplication[] = [];
  let a: ConcurrencyLimiter;
  let b: ConcurrencyLimiter;
  let n = 0;
  const limit = (max: number) => ({ key: `test:${process.pid}:${++n}`, limit: max });

  async function start(): Promise<ConcurrencyLimiter> {
    @Module({})
    class SlotsTestModule {}
    const app = await createService({ module: SlotsTestModule, imports: [ServiceRuntimeModule.forRoot({ service: 'slots-test', config: env.config })] }, env.config, {
      service: 'slots-test',
    });
    apps.push(app);
    return app.get(ConcurrencyLimiter);
  }

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
    a = await start();
    b = await start();
  });
  afterAll(async () => {
    for (const app of apps.reverse()) await app.close();
    await env?.cleanup();
  });

  it('admits up to the limit across processes, and a slot freed by another process counts at once', async () => {
    const l = limit(2);
    expect((await a.acquire([l], ['w1'], 60_000)).allowed).toBe(true);
    expect((await b.acquire([l], ['w2'], 60_000)).allowed).toBe(true);
    expect(await a.acquire([l], ['w3'], 60_000)).toEqual({ allowed: false, refusedBy: 0, held: 2 });
    // The work that took w1 in process a is ended by process b (as a queue-worker ends a generation).
    await b.release(['w1']);
    expect((await a.acquire([l], ['w3'], 60_000)).allowed).toBe(true);
    expect(await a.held(l)).toBe(2);
  });

  it('takes slots in every limit or in none, and several members at once or none', async () => {
    const roomy = limit(5);
    const tight = limit(1);
    expect((await a.acquire([roomy, tight], ['x1'], 60_000)).allowed).toBe(true);
    expect(await a.acquire([roomy, tight], ['x2'], 60_000)).toEqual({ allowed: false, refusedBy: 1, held: 1 });
    expect(await a.held(roomy)).toBe(1);
    expect(await a.acquire([roomy], ['y1', 'y2', 'y3', 'y4', 'y5'], 60_000)).toMatchObject({ allowed: false });
    expect((await a.acquire([roomy], ['y1', 'y2', 'y3', 'y4'], 60_000)).allowed).toBe(true);
    expect(await a.held(roomy)).toBe(5);
  });

  it("frees a crashed holder's slot when its lease runs out", async () => {
    const l = limit(1);
    expect((await a.acquire([l], ['crashed'], 300)).allowed).toBe(true);
    expect((await b.acquire([l], ['next'], 60_000)).allowed).toBe(false);
    await waitFor(async () => (await b.acquire([l], ['next'], 60_000)).allowed, { timeoutMs: 3000, description: 'the lease to run out' });
  });

  it('asks whether held work is still active before refusing, and frees what ended', async () => {
    const l = limit(1);
    expect((await a.acquire([l], ['job:1'], 60_000)).allowed).toBe(true);
    a.setActiveCheck('job:', async () => new Set(['job:1']));
    expect((await a.acquire([l], ['job:2'], 60_000)).allowed).toBe(false);
    a.setActiveCheck('job:', async () => new Set());
    expect((await a.acquire([l], ['job:2'], 60_000)).allowed).toBe(true);
    expect(await a.held(l)).toBe(1);
  });
});
