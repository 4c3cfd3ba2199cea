import net from 'node:net';
import { Module } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { parseConfig, type AppConfig } from '@atelier/config';
import type { BroadcastChannel } from '@atelier/contracts';
import { createTestEnvironment, TestHttp, waitFor, type TestEnvironment } from '@atelier/testing';
import { createService } from './bootstrap-service';
import { BroadcastBus } from './broadcast-bus.service';
import { ServiceRuntimeModule } from './service-runtime.module';

interface Ping {
  n: number;
  from: string;
}
const PINGS: BroadcastChannel<'test.pings', Ping> = { name: 'test.pings' };
const OTHER: BroadcastChannel<'test.other', Ping> = { name: 'test.other' };

describe('BroadcastBus', () => {
  let env: TestEnvironment;
  const apps: NestFastifyApplication[] = [];
  let n = 0;
  const ping = (from: string): Ping => ({ n: ++n, from });

  async function start(config: AppConfig): Promise<{ app: NestFastifyApplication; bus: BroadcastBus }> {
    @Module({})
    class BusTestModule {}
    const app = await createService(
      { module: BusTestModule, imports: [ServiceRuntimeModule.forRoot({ service: 'bus-test', config })] },
      config,
      { service: 'bus-test' },
    );
    apps.push(app);
    return { app, bus: app.get(BroadcastBus) };
  }

  const withEnv = (overrides: Record<string, string>) =>
    parseConfig({
      NODE_ENV: 'test',
      DATABASE_URL: env.config.DATABASE_URL,
      REDIS_URL: env.config.REDIS_URL,
      REDIS_PREFIX: env.config.REDIS_PREFIX,
      LOG_LEVEL: 'silent',
      ...overrides,
    });

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
  });
  afterAll(async () => {
    for (const app of apps.reverse()) await app.close();
    await env?.cleanup();
  });

  it('reaches every replica sharing the prefix, and no installation with another prefix', async () => {
    const a = await start(env.config);
    const b = await start(env.config);
    const other = await start(withEnv({ REDIS_PREFIX: `${env.prefix}-other` }));
    const got = { a: [] as Ping[], b: [] as Ping[], other: [] as Ping[] };
    await a.bus.subscribe(PINGS, (p) => got.a.push(p));
    await b.bus.subscribe(PINGS, (p) => got.b.push(p));
    await other.bus.subscribe(PINGS, (p) => got.other.push(p));

    const sent = ping('a');
    await a.bus.publish(PINGS, sent);
    await waitFor(() => got.a.length === 1 && got.b.length === 1, { description: 'both replicas to receive the ping' });
    expect(got.a).toEqual([sent]);
    expect(got.b).toEqual([sent]);

    // A message published on the other prefix after ours: one subscriber connection receives
    // messages in publish order, so if ours had leaked across prefixes it would arrive first.
    const own = ping('other');
    await other.bus.publish(PINGS, own);
    await waitFor(() => got.other.length > 0, { description: 'the other installation to receive its own ping' });
    expect(got.other).toEqual([own]);
    // And the other installation's message did not reach ours either.
    await a.bus.publish(PINGS, ping('a'));
    await waitFor(() => got.b.length === 2, { description: 'the second ping' });
    expect(got.b.map((p) => p.from)).toEqual(['a', 'a']);
  });

  it('stops delivering to a listener after it unsubscribes, and keeps serving the others', async () => {
    const a = await start(env.config);
    const b = await start(env.config);
    const first: Ping[] = [];
    const second: Ping[] = [];
    const sentinel: Ping[] = [];
    const unsubscribeFirst = await b.bus.subscribe(PINGS, (p) => first.push(p));
    const unsubscribeSecond = await b.bus.subscribe(PINGS, (p) => second.push(p));
    await b.bus.subscribe(OTHER, (p) => sentinel.push(p));

    await a.bus.publish(PINGS, ping('a'));
    await waitFor(() => first.length === 1 && second.length === 1, { description: 'both listeners to receive' });

    await unsubscribeFirst();
    await a.bus.publish(PINGS, ping('a'));
    await waitFor(() => second.length === 2, { description: 'the remaining listener to receive' });
    expect(first).toHaveLength(1);

    // With no listener left the channel is dropped; a later message on another channel (same
    // connection, so delivered in order) proves nothing more arrived for the first one.
    await unsubscribeSecond();
    await a.bus.publish(PINGS, ping('a'));
    await a.bus.publish(OTHER, ping('a'));
    await waitFor(() => sentinel.length === 1, { description: 'the sentinel message' });
    expect(first).toHaveLength(1);
    expect(second).toHaveLength(2);
  });

  it('a service started while Redis was unreachable subscribes once Redis is back', async () => {
    // A port with nothing behind it yet; a TCP proxy to the real Redis opens on it later.
    const port = await new Promise<number>((resolve) => {
      const probe = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as net.AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const late = await start(withEnv({ REDIS_URL: `redis://127.0.0.1:${port}` }));
    const received: Ping[] = [];
    // Must not throw (the service has to start), and must take effect when Redis returns.
    await late.bus.subscribe(PINGS, (p) => received.push(p));
    expect((await new TestHttp(late.app).request('GET', '/health')).status).toBe(503);

    const upstream = new URL(env.redisUrl);
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      const server = net.connect(Number(upstream.port || 6379), upstream.hostname);
      for (const s of [client, server]) {
        sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => sockets.delete(s));
      }
      client.pipe(server).pipe(client);
    });
    await new Promise<void>((resolve) => proxy.listen(port, '127.0.0.1', resolve));
    try {
      const publisher = await start(env.config);
      // Publish until one arrives: there is no event for "the late replica resubscribed".
      await waitFor(
        async () => {
          await publisher.bus.publish(PINGS, ping('publisher'));
          return received.length > 0;
        },
        { timeoutMs: 15_000, intervalMs: 100, description: 'the late replica to receive a broadcast' },
      );
      expect((await new TestHttp(late.app).request('GET', '/health')).status).toBe(200);
      await late.app.close();
      apps.splice(apps.indexOf(late.app), 1);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    }
  }, 30_000);
});
