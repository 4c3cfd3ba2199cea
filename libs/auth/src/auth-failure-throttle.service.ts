import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';
import { RedisService } from '@atelier/runtime';

const WINDOW_SECONDS = 60;
/** Most blocked addresses one replica remembers (an attack from many addresses is the limits' job, not this map's). */
const MAX_BLOCKED = 100_000;

/**
 * Failed authentication costs the guesser: API keys, trainer tokens, the admin token and console
 * sign-in each cost a lookup. Failures are counted per client address (as TRUST_PROXY lets the
 * gateway see it) across every replica in Redis; an address that reaches AUTH_FAILURES_PER_MINUTE gets
 * 429 with Retry-After for the rest of the window on every route that authenticates, before any
 * lookup. The check is a map read on this replica; only a failure costs a Redis call.
 */
@Injectable()
export class AuthFailureThrottle {
  private readonly logger = new Logger('AuthFailures');
  private readonly blocked = new Map<string, number>();

  constructor(
    private readonly redis: RedisService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Refuses an address blocked for its failures: 429, with how long until its window ends. */
  check(address: string, header: (name: string, value: string) => void): void {
    const until = this.blocked.get(address);
    if (until === undefined) return;
    const left = until - Date.now();
    if (left <= 0) {
      this.blocked.delete(address);
      return;
    }
    const seconds = Math.max(1, Math.ceil(left / 1000));
    header('retry-after', String(seconds));
    throw new ApiError('rate_limited', `Too many failed authentication attempts from this address; retry after ${seconds} s`);
  }

  /**
   * Runs one credential check under the throttle: refused at once while blocked, a 401 counted
   * when `presented` (a wrong credential; a missing one is not a guess). `what` names it in the
   * log, built only for a failure.
   */
  async guard<T>(address: string, header: (name: string, value: string) => void, what: () => string, authenticate: () => Promise<T>, presented = true): Promise<T> {
    this.check(address, header);
    try {
      return await authenticate();
    } catch (err) {
      // Counted before the 401 goes out, so the next attempt already meets the count.
      if (presented && err instanceof ApiError && err.status === 401) await this.failed(address, `${what()}: ${err.message}`);
      throw err;
    }
  }

  /** Counts a failure (a wrong credential, not a missing one); blocks the address once past the limit. */
  private async failed(address: string, what: string): Promise<void> {
    const key = this.redis.names.key('auth-failures', address);
    let count: number;
    let ttl: number;
    try {
      const replies = await this.redis.client.multi().incr(key).expire(key, WINDOW_SECONDS, 'NX').pttl(key).exec();
      count = Number(replies?.[0]?.[1] ?? 0);
      ttl = Number(replies?.[2]?.[1] ?? WINDOW_SECONDS * 1000);
    } catch {
      // Redis away: failures are not counted (the lookup itself still refuses the credential).
      return;
    }
    const limit = this.config.AUTH_FAILURES_PER_MINUTE;
    if (count >= limit && !this.blocked.has(address)) {
      if (this.blocked.size >= MAX_BLOCKED) this.blocked.clear();
      this.blocked.set(address, Date.now() + Math.max(ttl, 1000));
      if (count === limit) this.logger.warn(`${address}: ${count} failed authentications within ${WINDOW_SECONDS} s (last: ${what}); refused until the window ends`);
    } else if (count === 1 || count % 10 === 0) {
      this.logger.log(`${address}: failed authentication (${what}), ${count} within ${WINDOW_SECONDS} s`);
    }
  }
}
