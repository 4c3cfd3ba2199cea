import { ApiError } from '@atelier/contracts';
import { RedisService } from '@atelier/runtime';
import { createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { AuthFailureThrottle } from './auth-failure-throttle.service';

/** Failed authentication counted per address across replicas, in a real Redis. */
describe('AuthFailureThrottle', () => {
  let env: TestEnvironment;
  let redis: RedisService;
  let replicaA: AuthFailureThrottle;
  let replicaB: AuthFailureThrottle;
  let n = 0;
  const address = () => `198.51.100.${++n}`;
  const wrong = () => Promise.reject(ApiError.unauthorized('Invalid API key'));

  async function attempt(throttle: AuthFailureThrottle, from: string, check: () => Promise<string>, presented = true) {
    const headers: Record<string, string> = {};
    try {
      return { ok: await throttle.guard(from, (k, v) => (headers[k] = v), () => 'api key', check, presented), headers };
    } catch (err) {
      return { status: (err as ApiError).status, headers };
    }
  }

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent', AUTH_FAILURES_PER_MINUTE: '3' });
    redis = new RedisService(env.config);
    replicaA = new AuthFailureThrottle(redis, env.config);
    replicaB = new AuthFailureThrottle(redis, env.config);
  });
  afterAll(async () => {
    await redis?.client.quit();
    await env?.cleanup();
  });

  it('refuses an address with 429 and Retry-After once its failures reach the limit, counted across replicas', async () => {
    const from = address();
    expect((await attempt(replicaA, from, wrong)).status).toBe(401);
    expect((await attempt(replicaB, from, wrong)).status).toBe(401);
    expect((await attempt(replicaA, from, wrong)).status).toBe(401);
    const blocked = await attempt(replicaA, from, () => Promise.resolve('the right key'));
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(blocked.headers['retry-after'])).toBeLessThanOrEqual(60);
    // Another address is not touched.
    expect((await attempt(replicaA, address(), () => Promise.resolve('ok'))).ok).toBe('ok');
  });

  it('does not count a missing credential, a success, or a refusal other than 401', async () => {
    const from = address();
    for (let i = 0; i < 5; i++) {
      expect((await attempt(replicaA, from, wrong, false)).status).toBe(401);
      expect((await attempt(replicaA, from, () => Promise.resolve('ok'))).ok).toBe('ok');
      expect((await attempt(replicaA, from, () => Promise.reject(ApiError.forbidden('scope')))).status).toBe(403);
    }
    expect((await attempt(replicaB, from, () => Promise.resolve('still fine'))).ok).toBe('still fine');
  });
});
