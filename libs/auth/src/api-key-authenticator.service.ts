import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { API_KEY_REVOKED_CHANNEL, ApiError } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { BroadcastBus } from '@atelier/runtime';
import { apiKeyPrefix, hashApiKey, hashesEqual } from './api-key';
import type { Caller } from './caller';

const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * Verifies bearer keys. A verified key is trusted for at most AUTH_CACHE_MS (<= 1 s) without
 * re-reading Postgres, and revocations are also broadcast, so a revoked key stops working
 * on every replica within a second while hot keys cost no query per request.
 */
@Injectable()
export class ApiKeyAuthenticator implements OnModuleInit {
  private readonly cache = new Map<string, { caller: Caller; until: number }>();
  private readonly lastUsedWritten = new Map<string, number>();
  /**
   * Lookups in flight by key hash: concurrent requests with one key share one database read.
   * A burst (10,000 event streams reconnecting after a deploy) otherwise starts one query per
   * request before the first answer fills the cache, and the memory they hold at once stays
   * with the process (bench:queue's SSE figure).
   */
  private readonly lookups = new Map<string, Promise<Caller>>();

  constructor(
    private readonly prisma: PrismaService,
    private readonly bus: BroadcastBus,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.bus.subscribe(API_KEY_REVOKED_CHANNEL, ({ prefix }) => this.forget(prefix));
  }

  forget(prefix: string): void {
    for (const [hash, entry] of this.cache) if (entry.caller.keyPrefix === prefix) this.cache.delete(hash);
    // A request arriving after the revocation reads the database again rather than joining a lookup begun before it.
    this.lookups.clear();
  }

  async authenticate(authorization: string | string[] | undefined): Promise<Caller> {
    if (typeof authorization !== 'string' || authorization.trim() === '')
      throw ApiError.unauthorized('Missing Authorization header; send "Authorization: Bearer <API key>"');
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!match) throw ApiError.unauthorized('Authorization header must be "Bearer <API key>"');
    const key = match[1];
    const prefix = apiKeyPrefix(key);
    if (!prefix) throw ApiError.unauthorized('Invalid API key');
    const hash = hashApiKey(key);

    const now = Date.now();
    const cached = this.cache.get(hash);
    if (cached && cached.until > now) return unexpired(cached.caller, now);

    const inFlight = this.lookups.get(hash);
    if (inFlight) return inFlight;
    const lookup = this.lookup(prefix, hash, now).finally(() => {
      if (this.lookups.get(hash) === lookup) this.lookups.delete(hash);
    });
    this.lookups.set(hash, lookup);
    return lookup;
  }

  private async lookup(prefix: string, hash: string, now: number): Promise<Caller> {
    const row = await this.prisma.apiKey.findUnique({
      where: { prefix },
      include: { user: { include: { namespace: true } } },
    });
    // A key made for an org bills there by default (the namespace a request names still wins).
    const billed = row?.namespaceId ? await this.prisma.namespace.findUnique({ where: { id: row.namespaceId }, select: { id: true, name: true, rpm: true, tpm: true, maxConcurrent: true } }) : undefined;
    if (!row || !hashesEqual(row.hash, hash) || row.revokedAt || !row.user.namespace) {
      this.cache.delete(hash);
      throw ApiError.unauthorized('Invalid API key');
    }
    if (row.namespaceId && !billed) {
      this.cache.delete(hash);
      throw ApiError.unauthorized('Invalid API key: its namespace no longer exists');
    }
    const home = billed ?? row.user.namespace;
    const caller: Caller = {
      userId: row.userId,
      username: row.user.username,
      namespaceId: home.id,
      namespace: home.name,
      ...(billed && { namespaceType: 'org' as const }),
      keyPrefix: prefix,
      keyId: row.id,
      ...(row.budgetMaxSpend !== null && { hasBudget: true }),
      scopes: row.scopes,
      ...(row.expiresAt && { expiresAt: row.expiresAt.getTime() }),
      ...(row.rpm !== null && { rpm: row.rpm }),
      ...(home.rpm !== null && { namespaceRpm: home.rpm }),
      ...(row.tpm !== null && { tpm: row.tpm }),
      ...(home.tpm !== null && { namespaceTpm: home.tpm }),
      ...(row.maxConcurrent !== null && { maxConcurrent: row.maxConcurrent }),
      ...(home.maxConcurrent !== null && { namespaceMaxConcurrent: home.maxConcurrent }),
    };
    unexpired(caller, now);
    if (this.config.AUTH_CACHE_MS > 0) {
      if (this.cache.size > 10_000) this.cache.clear();
      this.cache.set(hash, { caller, until: now + this.config.AUTH_CACHE_MS });
    }
    this.touch(row.id, now);
    return caller;
  }

  /** last_used_at at minute resolution, written off the request path. */
  private touch(keyId: string, now: number): void {
    const last = this.lastUsedWritten.get(keyId) ?? 0;
    if (now - last < LAST_USED_RESOLUTION_MS) return;
    this.lastUsedWritten.set(keyId, now);
    void this.prisma.apiKey.update({ where: { id: keyId }, data: { lastUsedAt: new Date(now) } }).catch(() => undefined);
  }
}

/** The caller, unless its key has expired (401 saying so, cached or not). */
function unexpired(caller: Caller, now: number): Caller {
  if (caller.expiresAt !== undefined && caller.expiresAt <= now)
    throw ApiError.unauthorized(`API key ${caller.keyPrefix} expired at ${new Date(caller.expiresAt).toISOString()}`);
  return caller;
}
