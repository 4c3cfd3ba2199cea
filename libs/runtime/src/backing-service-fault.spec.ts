import { Redis } from 'ioredis';
import { Pool } from 'pg';
import { ApiError } from '@atelier/contracts';
import { createPrismaClient } from '@atelier/db';
import { freePort, testServers } from '@atelier/testing';
import { backingServiceFault, retryThroughOutage } from './backing-service-fault';

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
