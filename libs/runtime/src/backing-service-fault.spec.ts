import { Redis } from 'ioredis';
import { Pool } from 'pg';
import { ApiError } from '@atelier/contracts';
import { createPrismaClient } from '@atelier/db';
import { freePort, testServers } from '@atelier/testing';
import { backingServiceFault, nowOrOnceBack, retryThroughOutage } from './backing-service-fault';
import { waitFor } from '@atelier/testing';

/** Errors as the real clients raise them, against a port nobody listens on and against the real test servers. */
describe('backingServiceFault', () => {
  let closedPort: number;
  beforeAll(async () => {
    closedPort = await freePort();
  });

  it('recognises pg, Prisma and ioredis errors for an unreachable server', async () => {
    const pool = new Pool({ connectionString: `postgresql://postgres@127.0.0.1:${closedPort}/x`, connectionTimeoutMillis: 2000 });
    const pgError = await pool.query('SELECT 1').catch((e: unknown) => e);
    await pool.end();
    expect(backingServiceFault(pgError)).toBe('postgres');

    const prisma = createPrismaClient(`postgresql://postgres@127.0.0.1:${closedPort}/x`);
    const prismaError = await prisma.$queryRaw`SELECT 1`.catch((e: unknown) => e);
    await prisma.$disconnect();
    expect(backingServiceFault(prismaError)).toBe('postgres');

    const redis = new Redis({ port: closedPort, maxRetriesPerRequest: 1, retryStrategy: () => 50, lazyConnect: false });
    redis.on('error', () => undefined);
    const redisError = await redis.ping().catch((e: unknown) => e);
    redis.disconnect();
    expect(backingServiceFault(redisError)).toBe('redis');
  });

  it('leaves errors of the request or the code alone', async () => {
    const prisma = createPrismaClient(testServers().postgres);
    try {
      const sqlError = await prisma.$queryRaw`SELECT 1 / 0`.catch((e: unknown) => e);
      expect(sqlError).toBeInstanceOf(Error);
      expect(backingServiceFault(sqlError)).toBeUndefined();
    } finally {
      await prisma.$disconnect();
    }
    expect(backingServiceFault(ApiError.badRequest('temperature must be a number between 0 and 2'))).toBeUndefined();
    expect(backingServiceFault(new TypeError("Cannot read properties of undefined (reading 'id')"))).toBeUndefined();
    expect(backingServiceFault('Connection lost')).toBeUndefined();
  });
});

describe('retryThroughOutage', () => {
  const outage = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

  it('repeats an operation while the outage lasts and returns its result', async () => {
    let calls = 0;
    const waited: string[] = [];
    const result = await retryThroughOutage(
      async () => {
        if (++calls < 3) throw outage();
        return 'charged';
      },
      { maxWaitMs: 5_000, onWait: (service) => waited.push(service) },
    );
    expect(result).toBe('charged');
    expect(calls).toBe(3);
    expect(waited).toEqual(['postgres']);
  });

  it('throws any other error at once, and the outage error once the wait is over', async () => {
    let calls = 0;
    await expect(
      retryThroughOutage(
        async () => {
          calls++;
          throw new Error('duplicate key value violates unique constraint');
        },
        { maxWaitMs: 5_000 },
      ),
    ).rejects.toThrow('duplicate key');
    expect(calls).toBe(1);
    const started = Date.now();
    await expect(
      retryThroughOutage(
        async () => {
          throw outage();
        },
        { maxWaitMs: 400 },
      ),
    ).rejects.toThrow('ECONNREFUSED');
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});

describe('nowOrOnceBack', () => {
  const outage = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  const handlers = () => {
    const later: unknown[] = [];
    const failures: unknown[] = [];
    return { later, failures, onLater: (v: unknown) => later.push(v), onFailure: (e: unknown) => failures.push(e) };
  };

  it('answers at once when the operation succeeds, and retries in the background through an outage', async () => {
    const now = handlers();
    expect(await nowOrOnceBack(async () => 'charged', { maxWaitMs: 1_000, ...now })).toBe('charged');
    expect(now.later).toEqual([]);

    let calls = 0;
    const back = handlers();
    const result = await nowOrOnceBack(
      async () => {
        if (++calls < 3) throw outage();
        return 'charged later';
      },
      { maxWaitMs: 5_000, ...back },
    );
    // The caller is not held up by the outage...
    expect(result).toBeUndefined();
    // ...and the operation lands once the service is back.
    await waitFor(() => back.later.length === 1, { description: 'the background retry' });
    expect(back.later).toEqual(['charged later']);
    expect(back.failures).toEqual([]);
  });

  it('reports any other error, and an outage longer than the wait, as failures', async () => {
    const bug = handlers();
    expect(await nowOrOnceBack(async () => Promise.reject(new Error('bug')), { maxWaitMs: 1_000, ...bug })).toBeUndefined();
    expect(bug.failures.map((e) => (e as Error).message)).toEqual(['bug']);
    const long = handlers();
    await nowOrOnceBack(async () => Promise.reject(outage()), { maxWaitMs: 300, ...long });
    await waitFor(() => long.failures.length === 1, { description: 'the retry to give up' });
    expect(long.later).toEqual([]);
  });
});
