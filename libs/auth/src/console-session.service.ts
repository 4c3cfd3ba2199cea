import { createHash, randomBytes } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';
import { RedisService } from '@atelier/runtime';
import { apiKeyPrefix, hashApiKey, hashesEqual } from './api-key';

/** The console's session cookie: an opaque id; the key it stands for stays on the server. */
export const SESSION_COOKIE = 'atelier_session';

/** What a session holds in Redis: the key's prefix and hash (never the key), and whether the admin token opened it. */
export interface ConsoleSession {
  /** The API key's prefix and SHA-256, as the api_keys row stores them. */
  key?: { prefix: string; hash: string };
  /** SHA-256 of the admin token given at sign-in: a rotated ADMIN_TOKEN ends the operator part. */
  admin?: string;
  /** Sign-in time (ms): the absolute expiry counts from it. */
  createdAt: number;
}

/** Touching a session's expiry at most this often per process: one Redis write a minute, not per request. */
const TOUCH_EVERY_MS = 60_000;

const sessionIdPattern = /^[A-Za-z0-9_-]{43}$/;

/** The session id in a Cookie header, if any. */
export function sessionIdOf(cookieHeader: string | undefined): string | undefined {
  if (!cookieHeader) return undefined;
  for (const part of cookieHeader.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) {
      const value = part.slice(eq + 1).trim();
      return sessionIdPattern.test(value) ? value : undefined;
    }
  }
  return undefined;
}

/**
 * Console sessions in Redis, with an idle and an absolute expiry. The id is hashed before it names
 * a Redis key, so reading Redis does not yield a usable cookie.
 */
@Injectable()
export class ConsoleSessions {
  private readonly touched = new Map<string, number>();
  /** The configured ADMIN_TOKEN's hash, what an operator session holds; undefined without a token. */
  private readonly adminHash: string | undefined;

  constructor(
    private readonly redis: RedisService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.adminHash = config.ADMIN_TOKEN ? hashApiKey(config.ADMIN_TOKEN) : undefined;
  }

  private get idleMs(): number {
    return this.config.CONSOLE_SESSION_IDLE_MINUTES * 60_000;
  }

  get maxAgeMs(): number {
    return this.config.CONSOLE_SESSION_MAX_HOURS * 3_600_000;
  }

  private redisKey(id: string): string {
    return this.redis.names.key('console-session', createHash('sha256').update(id).digest('base64url'));
  }

  /** The session's contents for the given secrets; 401 for a malformed key or a wrong admin token (the key itself is checked by the caller). */
  describe(apiKey: string | undefined, adminToken: string | undefined): Omit<ConsoleSession, 'createdAt'> {
    const session: Omit<ConsoleSession, 'createdAt'> = {};
    if (apiKey !== undefined) {
      const prefix = apiKeyPrefix(apiKey);
      if (!prefix) throw ApiError.unauthorized('Invalid API key');
      session.key = { prefix, hash: hashApiKey(apiKey) };
    }
    if (adminToken !== undefined) {
      const hash = hashApiKey(adminToken);
      if (!this.adminHash || !hashesEqual(hash, this.adminHash)) throw ApiError.unauthorized('Invalid admin token');
      session.admin = hash;
    }
    return session;
  }

  async create(contents: Omit<ConsoleSession, 'createdAt'>): Promise<string> {
    const id = randomBytes(32).toString('base64url');
    const session: ConsoleSession = { ...contents, createdAt: Date.now() };
    await this.redis.client.set(this.redisKey(id), JSON.stringify(session), 'PX', Math.min(this.idleMs, this.maxAgeMs));
    return id;
  }

  /** The live session with this id; 401 when it is unknown, idle too long or past its absolute expiry. */
  async read(id: string): Promise<ConsoleSession> {
    const redisKey = this.redisKey(id);
    const raw = await this.redis.client.get(redisKey);
    if (!raw) throw ApiError.unauthorized('Your console session has ended; sign in again');
    const session = JSON.parse(raw) as ConsoleSession;
    const now = Date.now();
    const left = session.createdAt + this.maxAgeMs - now;
    if (left <= 0) {
      await this.end(id);
      throw ApiError.unauthorized('Your console session has ended; sign in again');
    }
    const last = this.touched.get(redisKey) ?? 0;
    if (now - last >= TOUCH_EVERY_MS) {
      if (this.touched.size > 10_000) this.touched.clear();
      this.touched.set(redisKey, now);
      void this.redis.client.pexpire(redisKey, Math.min(this.idleMs, left)).catch(() => undefined);
    }
    return session;
  }

  /** Whether the session's admin part still matches the configured ADMIN_TOKEN. */
  isOperator(session: ConsoleSession): boolean {
    return !!session.admin && !!this.adminHash && hashesEqual(session.admin, this.adminHash);
  }

  async end(id: string): Promise<void> {
    const redisKey = this.redisKey(id);
    this.touched.delete(redisKey);
    await this.redis.client.del(redisKey);
  }
}
