import { parseConfig } from '@atelier/config';
import { createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { ClusterSweeps } from './cluster-sweeps.service';
import { RedisService } from './redis.module';

describe('ClusterSweeps', () => {
  let env: TestEnvironment;
  const services: RedisService[] = [];
  const replica = (redisUrl: string, prefix: string) => {
    const redis = new RedisService(parseConfig({ NODE_ENV: 'test', DATABASE_URL: env.config.DATABASE_URL, REDIS_URL: redisUrl, REDIS_PREFIX: prefix }));
    services.push(redis);
    return new ClusterSweeps(redis);
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  beforeAll(async () => {
    env = await createTestEnvironment();
  });
  afterAll(async () => {
    for (const s of services) await s.onApplicationShutdown();
    await env?.cleanup();
  });

  it('runs a sweep about once per interval across three replicas, not once per replica', async () => {
    const prefix = `${env.config.REDIS_PREFIX}-sweeps`;
    const runs: string[] = [];
    const interval = 100;
    const started = performance.now();
    const periodic = ['a', 'b', 'c'].map((name) => replica(env.config.REDIS_URL, prefix).every('test-sweep', interval, async () => void runs.push(name), () => undefined));
    await sleep(1550);
    const elapsed = performance.now() - started;
    await Promise.all(periodic.map((p) => p.stop()));
    // Three replicas each ticking 15 times would sweep 45 times; one lease per ~0.9 interval allows at most 18.
    expect(runs.length).toBeGreaterThanOrEqual(8);
    expect(runs.length).toBeLessThanOrEqual(Math.ceil(elapsed / (interval * 0.9)) + 1);
  });

  it('takes over when the replica holding the lease stops, and sweeps anyway while Redis cannot be reached', async () => {
    const prefix = `${env.config.REDIS_PREFIX}-takeover`;
    const first = replica(env.config.REDIS_URL, prefix);
    const second = replica(env.config.REDIS_URL, prefix);
    expect(await first.take('repair', 200)).toBe(true);
    expect(await second.take('repair', 200)).toBe(false);
    await sleep(250);
    expect(await second.take('repair', 200)).toBe(true);
    // Nothing listens on port 1: the lease cannot be asked for, and the sweep still runs.
    const cut = replica('redis://127.0.0.1:1', prefix);
    let swept = 0;
    const periodic = cut.every('repair', 50, async () => void swept++, () => undefined);
    await sleep(400);
    await periodic.stop();
    expect(swept).toBeGreaterThan(0);
  });
});
