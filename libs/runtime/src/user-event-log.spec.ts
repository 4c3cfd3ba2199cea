import { createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { RedisService } from './redis.module';
import { UserEventLog } from './user-event-log.service';

describe('UserEventLog.append', () => {
  let env: TestEnvironment;
  let redis: RedisService;
  let log: UserEventLog;

  beforeAll(async () => {
    env = await createTestEnvironment();
    redis = new RedisService(env.config);
    log = new UserEventLog(redis, env.config);
  });
  afterAll(async () => {
    await redis?.onApplicationShutdown();
    await env?.cleanup();
  });

  it('appends an event once: concurrent and later appends under its name get the first id, and a replay shows it once', async () => {
    const user = 'u-once';
    const first = await log.append(user, { n: 1 }, 'g-1');
    // A first attempt that stalled and the outbox sweeper's retry, arriving together.
    const again = await Promise.all([log.append(user, { n: 1 }, 'g-1'), log.append(user, { n: 1 }, 'g-1')]);
    expect(again).toEqual([first, first]);
    const other = await log.append(user, { n: 2 }, 'g-2');
    expect(other).not.toBe(first);
    const { events } = await log.after<{ n: number }>(user, '0-0');
    expect(events.map((e) => e.id)).toEqual([first, other]);
    expect(events.map((e) => e.payload.n)).toEqual([1, 2]);
    // The name is the user's own: another user's event of the same name is its own.
    expect(await log.append('u-other', { n: 1 }, 'g-1')).not.toBeUndefined();
    expect((await log.after('u-other', '0-0')).events).toHaveLength(1);
  });
});
