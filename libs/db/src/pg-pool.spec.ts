import { jest } from '@jest/globals';
import { testServers } from '@atelier/testing';
import { createPgPool } from './pg-pool';
import { createPrismaClient } from './prisma.service';

/** The backend pid each of `n` connections answers from, holding all n at once so the pool opens them. */
async function backendPids(query: (text: string) => Promise<{ rows: { pid: number }[] }>, n: number): Promise<number[]> {
  const rows = await Promise.all(Array.from({ length: n }, () => query('SELECT pg_backend_pid() AS pid FROM pg_sleep(0.05)')));
  return rows.map((r) => r.rows[0].pid).sort();
}

/** Only timers are faked: the sockets, and the callbacks they resolve through, stay real. */
const QUIET_TIMERS: Parameters<typeof jest.useFakeTimers>[0] = { doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask', 'performance', 'Date', 'hrtime'] };

/** 60 s without a query: past pg's idle timeout (10 s), a default pool has closed every connection. */
function quietSpell(): void {
  jest.advanceTimersByTime(60_000);
  jest.useRealTimers();
}

describe('pools keep their connections through a quiet spell', () => {
  // Faked before each pool exists: pg-pool arms each idle timer when a client is released.
  beforeEach(() => jest.useFakeTimers(QUIET_TIMERS));
  afterEach(() => jest.useRealTimers());

  it('a hot-path pool still holds the same backends after longer idle than pg closes them by default (10 s)', async () => {
    const pool = createPgPool(testServers().postgres, 3, 'atelier-pool-spec');
    try {
      const before = await backendPids((text) => pool.query(text), 3);
      expect(new Set(before).size).toBe(3);
      quietSpell();
      expect(pool.totalCount).toBe(3);
      expect(await backendPids((text) => pool.query(text), 3)).toEqual(before);
    } finally {
      await pool.end();
    }
  });

  it("Prisma's pool is kept the same way", async () => {
    const prisma = createPrismaClient(testServers().postgres, 3);
    const query = async () => ({ rows: await prisma.$queryRawUnsafe<{ pid: number }[]>('SELECT pg_backend_pid() AS pid FROM pg_sleep(0.05)') });
    try {
      const before = await backendPids(query, 3);
      expect(new Set(before).size).toBe(3);
      quietSpell();
      expect(await backendPids(query, 3)).toEqual(before);
    } finally {
      await prisma.$disconnect();
    }
  });
});
