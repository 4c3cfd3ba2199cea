import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { API_KEY_REVOKED_CHANNEL, ApiError, NAMESPACE_LIMITS_CHANGED_CHANNEL } from '@atelier/contracts';
import { BroadcastBus, RedisService, runPeriodically } from '@atelier/runtime';
import { apiKeyPrefix, hashApiKey, hashesEqual } from './api-key';
import { ApiKeysRepository, type KeyRow } from './api-keys.repository';
import type { Caller } from './caller';

const LAST_USED_RESOLUTION_MS = 60_000;


/**
 * How long after its last request a key's reading is kept fresh in the background (refresh):
 * a caller who pauses for up to this long (a developer at a prompt, a job every few seconds)
 * finds it verified, instead of paying the read on the request (auth 1.9 ms of the 4.2-4.5 ms
 * added after 6 s idle on a 2-core Intel Xeon VM, bench:chat phase 5).
 */
/** How long a key found unknown or revoked is refused from memory: never a key that could start working (a new key has a new hash). */
const NEGATIVE_CACHE_MS = 10_000;
const KEEP_WARM_MS = 10 * 60_000;
/** The most keys one refresh re-reads (the most recently used first); the others expire as before. */
const MAX_WARM_KEYS = 1_000;

/** The prefix and hash of the API key in a "Bearer <key>" header; 401 for anything else. */
function presentedKey(authorization: string | string[] | undefined): { prefix: string; hash: string } {
  if (typeof authorization !== 'string' || authorization.trim() === '')
    throw ApiError.unauthorized('Missing Authorization header; send "Authorization: Bearer <API key>" (or "x-api-key: <API key>")');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) throw ApiError.unauthorized('Authorization header must be "Bearer <API key>"');
  const key = match[1];
  const prefix = apiKeyPrefix(key);
  if (!prefix) throw ApiError.unauthorized('Invalid API key');
  return { prefix, hash: hashApiKey(key) };
}

/**
 * Verifies bearer keys. A verified key is trusted for at most AUTH_CACHE_MS (<= 1 s) after it was
 * read from Postgres, and revocations are also broadcast, so a revoked key stops working on every
 * replica within a second while hot keys cost no query per request. Keys used within KEEP_WARM_MS
 * are read again in the background, all in one statement, before their reading expires, so the
 * bound holds without a read on the request path.
 */
@Injectable()
export class ApiKeyAuthenticator implements OnModuleInit, OnModuleDestroy {
  private readonly cache = new Map<string, { caller: Caller; until: number; usedAt: number }>();
  private readonly lastUsedWritten = new Map<string, number>();
  /**
   * Lookups in flight by key hash: concurrent requests with one key share one database read.
   * A burst (10,000 event streams reconnecting after a deploy) otherwise starts one query per
   * request before the first answer fills the cache, and the memory they hold at once stays
   * with the process (bench:queue's SSE figure).
   */
  private readonly lookups = new Map<string, Promise<Caller>>();
  /**
   * The header each connection last presented, with its key's prefix and hash. Clients (the
   * OpenAI SDK among them) send every request of a keep-alive connection with the same header, and
   * hashing it was 2-3 % of the gateway's CPU on an authenticated read. A WeakMap: the header is
   * held no longer than the connection that sent it.
   */
  private readonly presented = new WeakMap<object, { authorization: string; prefix: string; hash: string }>();
  /**
   * Counts revocations heard: a reading taken before one (a lookup or refresh in flight) is not
   * cached after it, so a broadcast revocation is never undone by a read that raced it.
   */
  private revocations = 0;
  /** Hashes found unknown, wrong or revoked, until when they are refused without a lookup. */
  private readonly refused = new Map<string, number>();
  private refresher?: { stop(): Promise<void> };

  constructor(
    private readonly keys: ApiKeysRepository,
    private readonly bus: BroadcastBus,
    private readonly redis: RedisService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.bus.subscribe(API_KEY_REVOKED_CHANNEL, ({ prefix }) => this.forget(prefix));
    await this.bus.subscribe(NAMESPACE_LIMITS_CHANGED_CHANNEL, ({ namespaceId, ackKey }) => {
      this.forgetNamespace(namespaceId);
      // Acknowledged once dropped: the change's sender waits for every replica (LimitChanges).
      void this.redis.client
        .multi()
        .rpush(ackKey, '1')
        .pexpire(ackKey, 60_000)
        .exec()
        .catch(() => undefined);
    });
    const ttl = this.config.AUTH_CACHE_MS;
    // Twice per reading's life, so each is renewed before it expires. A failed read (Postgres
    // away) leaves the readings to expire: the next request's own lookup reports the outage.
    if (ttl > 0) this.refresher = runPeriodically(Math.max(ttl / 2, 50), () => this.refresh(ttl / 2), () => undefined);
  }

  async onModuleDestroy(): Promise<void> {
    await this.refresher?.stop();
  }

  forget(prefix: string): void {
    this.forgetWhere((caller) => caller.keyPrefix === prefix);
  }

  /** Drops every cached key billing to the namespace: its limits ride on the cached caller. */
  forgetNamespace(namespaceId: string): void {
    this.forgetWhere((caller) => caller.namespaceId === namespaceId);
  }

  private forgetWhere(match: (caller: Caller) => boolean): void {
    this.revocations++;
    for (const [hash, entry] of this.cache) if (match(entry.caller)) this.cache.delete(hash);
    // A request arriving after the change reads the database again rather than joining a lookup begun before it.
    this.lookups.clear();
  }

  /**
   * Verifies the request's Authorization header. `connection` (the request's socket) lets a
   * keep-alive connection that sends the same header again skip parsing and hashing it.
   */
  authenticate(authorization: string | string[] | undefined, connection?: object): Promise<Caller> {
    let presented = connection ? this.presented.get(connection) : undefined;
    if (!presented || presented.authorization !== authorization) {
      try {
        presented = { authorization: authorization as string, ...presentedKey(authorization) };
      } catch (err) {
        return Promise.reject(err as Error);
      }
      if (connection) this.presented.set(connection, presented);
    }
    return this.verify(presented.prefix, presented.hash);
  }

  /**
   * Verifies a key known by its prefix and hash (a console session holds these, never the key):
   * the same cache, reading, revocation and expiry as a presented key.
   */
  verify(prefix: string, hash: string): Promise<Caller> {
    const now = Date.now();
    // A key just found unknown or revoked is refused without another lookup (a guesser's retries cost nothing).
    const refused = this.refused.get(hash);
    if (refused !== undefined) {
      if (refused > now) return Promise.reject(ApiError.unauthorized('Invalid API key'));
      this.refused.delete(hash);
    }
    const cached = this.cache.get(hash);
    if (cached && cached.until > now) {
      cached.usedAt = now;
      this.touch(cached.caller.keyId, now);
      try {
        return Promise.resolve(unexpired(cached.caller, now));
      } catch (err) {
        return Promise.reject(err as Error);
      }
    }

    const inFlight = this.lookups.get(hash);
    if (inFlight) return inFlight;
    const lookup = this.lookup(prefix, hash, now).finally(() => {
      if (this.lookups.get(hash) === lookup) this.lookups.delete(hash);
    });
    this.lookups.set(hash, lookup);
    return lookup;
  }

  private async lookup(prefix: string, hash: string, now: number): Promise<Caller> {
    const heard = this.revocations;
    const [row] = await this.keys.byPrefixes([prefix]);
    const caller = callerOf(row, hash);
    if (caller instanceof ApiError) {
      this.cache.delete(hash);
      if (caller.message === 'Invalid API key') {
        if (this.refused.size > 10_000) this.refused.clear();
        this.refused.set(hash, now + NEGATIVE_CACHE_MS);
      }
      throw caller;
    }
    unexpired(caller, now);
    if (this.config.AUTH_CACHE_MS > 0 && heard === this.revocations) {
      if (this.cache.size > 10_000) this.cache.clear();
      this.cache.set(hash, { caller, until: now + this.config.AUTH_CACHE_MS, usedAt: now });
    }
    this.touch(row.id, now);
    return caller;
  }

  /**
   * Reads again, in one statement, the keys used within KEEP_WARM_MS whose reading expires within
   * `withinMs`; each new reading counts from when the statement was sent. A key found invalid
   * (revoked, gone, its namespace gone) is dropped, so its next request is refused by its own lookup.
   */
  private async refresh(withinMs: number): Promise<void> {
    const sent = Date.now();
    const due: [string, { caller: Caller; usedAt: number }][] = [];
    for (const [hash, entry] of this.cache) {
      if (sent - entry.usedAt > KEEP_WARM_MS) {
        if (entry.until <= sent) this.cache.delete(hash);
      } else if (entry.until - sent <= withinMs) due.push([hash, entry]);
    }
    if (due.length === 0) return;
    const warm = due.sort((a, b) => b[1].usedAt - a[1].usedAt).slice(0, MAX_WARM_KEYS);
    const heard = this.revocations;
    const rows = await this.keys.byPrefixes([...new Set(warm.map(([, e]) => e.caller.keyPrefix))]);
    if (heard !== this.revocations) return;
    const byPrefix = new Map(rows.map((r) => [r.prefix, r]));
    for (const [hash, entry] of warm) {
      const caller = callerOf(byPrefix.get(entry.caller.keyPrefix), hash);
      if (caller instanceof ApiError) this.cache.delete(hash);
      // usedAt read now: a request may have come in while the statement ran.
      else this.cache.set(hash, { caller, until: sent + this.config.AUTH_CACHE_MS, usedAt: this.cache.get(hash)?.usedAt ?? entry.usedAt });
    }
  }

  /** last_used_at at minute resolution, written off the request path. */
  private touch(keyId: string | undefined, now: number): void {
    if (keyId === undefined) return;
    const last = this.lastUsedWritten.get(keyId) ?? 0;
    if (now - last < LAST_USED_RESOLUTION_MS) return;
    this.lastUsedWritten.set(keyId, now);
    void this.keys.touch(keyId, new Date(now)).catch(() => undefined);
  }
}

/** The caller a key's row describes, or the 401 that refuses it (no row, another key's hash, revoked, no namespace). */
function callerOf(row: KeyRow | undefined, hash: string): Caller | ApiError {
  if (!row || !hashesEqual(row.hash, hash) || row.revoked || row.own_id === null) return ApiError.unauthorized('Invalid API key');
  if (row.home_id === null || row.home_name === null) return ApiError.unauthorized('Invalid API key: its namespace no longer exists');
  // Leaving an org revokes the member's keys for it; this holds even for a key that revocation missed.
  if (!row.member) return ApiError.unauthorized(`Invalid API key: its owner is no longer a member of ${row.home_name}`);
  return {
    userId: row.user_id,
    username: row.username,
    namespaceId: row.home_id,
    namespace: row.home_name,
    ...(row.namespace_id !== null && { namespaceType: 'org' as const }),
    keyPrefix: row.prefix,
    keyId: row.id,
    ...(row.has_budget && { hasBudget: true }),
    scopes: row.scopes,
    ...(row.expires_at && { expiresAt: new Date(row.expires_at).getTime() }),
    ...(row.rpm !== null && { rpm: row.rpm }),
    ...(row.home_rpm !== null && { namespaceRpm: row.home_rpm }),
    ...(row.read_rpm !== null && { readRpm: row.read_rpm }),
    ...(row.home_read_rpm !== null && { namespaceReadRpm: row.home_read_rpm }),
    ...(row.tpm !== null && { tpm: row.tpm }),
    ...(row.home_tpm !== null && { namespaceTpm: row.home_tpm }),
    ...(row.max_concurrent !== null && { maxConcurrent: row.max_concurrent }),
    ...(row.home_max_concurrent !== null && { namespaceMaxConcurrent: row.home_max_concurrent }),
    ...(row.store_refused && { storeRefused: true }),
    ...(row.home_capture_rate !== null && row.home_capture_rate > 0 && { captureRate: row.home_capture_rate }),
    ...(row.limit_chain?.length && {
      makerLimits: row.limit_chain.map((l) => ({
        keyPrefix: l.prefix,
        ...(typeof l.rpm === 'number' && { rpm: l.rpm }),
        ...(typeof l.read_rpm === 'number' && { readRpm: l.read_rpm }),
        ...(typeof l.tpm === 'number' && { tpm: l.tpm }),
        ...(typeof l.max_concurrent === 'number' && { maxConcurrent: l.max_concurrent }),
      })),
    }),
  };
}

/** The caller, unless its key has expired (401 saying so, cached or not). */
function unexpired(caller: Caller, now: number): Caller {
  if (caller.expiresAt !== undefined && caller.expiresAt <= now)
    throw ApiError.unauthorized(`API key ${caller.keyPrefix} expired at ${new Date(caller.expiresAt).toISOString()}`);
  return caller;
}
