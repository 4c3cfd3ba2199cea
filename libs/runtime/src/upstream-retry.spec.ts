import { MAX_RETRY_AFTER_MS, retryAfterMs, retryDelayMs, statusFailureKind } from './upstream-retry';

describe('the upstream retry policy', () => {
  it('retries what a later attempt may fix, moves on from a misconfigured server, and stops on a bad request', () => {
    expect([429, 408, 500, 502, 503, 504].map(statusFailureKind)).toEqual(Array(6).fill('retry'));
    expect([401, 403, 404].map(statusFailureKind)).toEqual(['next', 'next', 'next']);
    expect([400, 409, 413, 422].map(statusFailureKind)).toEqual(['fatal', 'fatal', 'fatal', 'fatal']);
  });

  it('doubles the backoff per retry, waits longer when the server asks, and gives up past the retries or a long Retry-After', () => {
    const policy = { maxRetries: 3, backoffMs: 100 };
    expect([0, 1, 2].map((n) => retryDelayMs(policy, n))).toEqual([100, 200, 400]);
    expect(retryDelayMs(policy, 3)).toBeUndefined();
    expect(retryDelayMs(policy, 0, 1500)).toBe(1500);
    expect(retryDelayMs(policy, 0, MAX_RETRY_AFTER_MS + 1)).toBeUndefined();
    expect(retryDelayMs({ maxRetries: 0 }, 0)).toBeUndefined();
    expect(retryDelayMs({}, 0)).toBe(200);
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    expect(retryAfterMs('2')).toBe(2000);
    expect(retryAfterMs(undefined)).toBeUndefined();
    expect(retryAfterMs('soon')).toBeUndefined();
    const inAMinute = retryAfterMs(new Date(Date.now() + 60_000).toUTCString())!;
    expect(inAMinute).toBeGreaterThan(55_000);
    expect(inAMinute).toBeLessThanOrEqual(60_000);
  });
});
