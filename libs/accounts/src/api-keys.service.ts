import { Injectable } from '@nestjs/common';
import { API_SCOPES, generateApiKey, NamespaceAccess, type Caller } from '@atelier/auth';
import { ApiError, DECIMAL_PATTERN, parseApiInstant } from '@atelier/contracts';
import { Prisma, type ApiKeyModel } from '@atelier/db';
import { AccountKeysRepository, type MakerBudget } from './account-keys.repository';
import { AccountsRepository } from './accounts.repository';
import { AccountsService } from './accounts.service';

export const BUDGET_PERIODS = ['day', 'month', 'total'] as const;
export type BudgetPeriod = (typeof BUDGET_PERIODS)[number];

type Problems = { field: string; message: string }[];

/** Longest lifetime a self-service key may be given. */
const MAX_LIFETIME_MS = 5 * 365 * 24 * 3600 * 1000;

export interface ApiKeyView {
  prefix: string;
  name: string | null;
  namespace: string;
  /** null: every scope. */
  scopes: string[] | null;
  expires_at: string | null;
  limits: { rpm?: number; read_rpm?: number; tpm?: number; max_concurrent?: number } | null;
  /** `spent`: charged in the current period (UTC day or month, or in total). */
  budget: { max_spend: string; period: BudgetPeriod; spent: string } | null;
  /** false: the key's requests are never stored (stored completions), whatever they or the namespace's capture_rate say. */
  store: boolean;
  created_at: string;
  last_used_at: string | null;
}

/**
 * API keys that users make, list and revoke themselves: each with a name, the namespace it bills
 * to by default (the user's own or an org the user belongs to), optional scopes and an expiry.
 * Revoking one takes effect on every gateway replica within a second (the revocation broadcast).
 */
@Injectable()
export class ApiKeys {
  constructor(
    private readonly keys: AccountKeysRepository,
    private readonly accountRows: AccountsRepository,
    private readonly access: NamespaceAccess,
    private readonly accounts: AccountsService,
  ) {}

  /** POST /api/api_keys: a key of the caller's own. */
  create(caller: Caller, rawBody: unknown): Promise<ApiKeyView & { api_key: string }> {
    return this.createFor(caller, rawBody, true, caller);
  }

  /**
   * The operator's POST /api/admin/users/{username}/api_keys: the same fields for any user
   * (name optional there; an empty body makes a plain key, as before).
   */
  async createForUser(username: string, rawBody: unknown): Promise<ApiKeyView & { api_key: string }> {
    const user = await this.accountRows.userWithNamespace(username);
    if (!user) throw ApiError.notFound(`User not found: ${username}`);
    const owner: Caller = { userId: user.id, username, namespaceId: user.namespace.id, namespace: user.namespace.name, keyPrefix: '' };
    return this.createFor(owner, rawBody ?? {}, false);
  }

  /** `maker`: the key this one is made with (self-service); it may only make a key at or below its own limits, budget, scopes and expiry. */
  private async createFor(owner: Caller, rawBody: unknown, nameRequired: boolean, maker?: Caller): Promise<ApiKeyView & { api_key: string }> {
    if (rawBody === null || typeof rawBody !== 'object' || Array.isArray(rawBody)) throw ApiError.badRequest('Request body must be a JSON object');
    const body = rawBody as Record<string, unknown>;
    const problems: Problems = [];
    const unknown = Object.keys(body).filter((k) => !['name', 'namespace', 'expires_at', 'scopes', 'limits', 'budget', 'store'].includes(k));
    for (const k of unknown) problems.push({ field: k, message: 'is not a field of an API key' });
    const limits = keyLimits(body.limits, problems);
    const budget = keyBudget(body.budget, problems);
    if (body.name === undefined && !nameRequired) {
      // The operator's plain key: no name.
    } else if (typeof body.name !== 'string' || body.name.trim() === '' || body.name.length > 100) problems.push({ field: 'name', message: 'must be a string of 1 to 100 characters' });
    const expiresAt = expiry(body.expires_at, problems);
    if (body.store !== undefined && typeof body.store !== 'boolean') problems.push({ field: 'store', message: 'must be a boolean (false: never store its requests)' });
    let scopes: string[] = [];
    if (body.scopes !== undefined && body.scopes !== null) {
      if (!Array.isArray(body.scopes) || body.scopes.length === 0 || body.scopes.some((s) => !(API_SCOPES as readonly unknown[]).includes(s)))
        problems.push({ field: 'scopes', message: `must be a non-empty array of ${API_SCOPES.join(', ')}` });
      else scopes = [...new Set(body.scopes as string[])];
    }
    if (problems.length) throw ApiError.badRequest(problems.map((p) => `${p.field} ${p.message}`).join('; '), { fields: problems });
    const inherited = maker ? withinMaker(maker, { limits, scopes, expiresAt }) : undefined;
    if (inherited) {
      Object.assign(limits, inherited.limits);
      scopes = inherited.scopes;
    }
    const keyExpiry = inherited ? inherited.expiresAt : expiresAt;
    const scope = await this.access.resolve(owner, body.namespace ?? owner.namespace);
    const own = await this.accountRows.namespaceLimits(scope.id);
    const caps = { rpm: own?.rpm ?? null, read_rpm: own?.readRpm ?? null, tpm: own?.tpm ?? null, max_concurrent: own?.maxConcurrent ?? null };
    for (const k of LIMIT_NAMES) {
      const cap = caps[k];
      if (limits[k] !== null && cap !== null && limits[k] > cap)
        throw ApiError.badRequest(`limits.${k} must not exceed the namespace's own limit of ${cap}`, { fields: [{ field: `limits.${k}`, message: `must be at most ${cap}` }] });
    }
    const key = generateApiKey();
    const data = {
      userId: owner.userId,
      prefix: key.prefix,
      hash: key.hash,
      name: typeof body.name === 'string' ? body.name.trim() : null,
      namespaceId: scope.id,
      scopes,
      expiresAt: keyExpiry,
      rpm: limits.rpm,
      readRpm: limits.read_rpm,
      tpm: limits.tpm,
      maxConcurrent: limits.max_concurrent,
      budgetMaxSpend: budget?.max_spend ?? null,
      budgetPeriod: budget?.period ?? null,
      // A key made by one that refuses storing refuses it too: privacy is not escaped by making a key.
      storeRefused: body.store === false || maker?.storeRefused === true,
      ...(maker?.keyId && { parentId: maker.keyId, limitChain: limitChainOf(maker) }),
    };
    const row =
      maker?.hasBudget && maker.keyId
        ? await this.keys.createCarved(maker.keyId, data, (left) => carveBudget(maker, left, budget))
        : await this.keys.create(data);
    return { api_key: key.key, ...view(row, scope.name) };
  }

  /** The caller's keys that still work or expired (not revoked), newest first, without secrets. */
  async list(caller: Caller): Promise<{ data: ApiKeyView[] }> {
    const rows = await this.keys.liveKeysOf(caller.userId);
    const names = await this.accountRows.namespaceNames([...new Set(rows.map((r) => r.namespaceId).filter((id): id is string => id !== null))]);
    const own = (await this.accountRows.ownNamespaceName(caller.userId)) ?? caller.username;
    return { data: rows.map((r) => view(r, r.namespaceId ? (names.get(r.namespaceId) ?? own) : own)) };
  }

  /** Revokes one of the caller's own keys; anyone else's looks unknown (404). */
  async revoke(caller: Caller, prefix: string): Promise<{ prefix: string; revoked_at: number; revoked_keys: string[] }> {
    const key = await this.keys.byPrefix(prefix);
    if (!key || key.userId !== caller.userId) throw ApiError.notFound(`API key not found: ${prefix}`);
    return this.accounts.revokeApiKey(prefix);
  }
}

const LIMIT_NAMES = ['rpm', 'read_rpm', 'tpm', 'max_concurrent'] as const;
type KeyLimits = Record<(typeof LIMIT_NAMES)[number], number | null>;

/**
 * What a key made with `maker` gets: each limit, its scopes and its expiry at or below the
 * maker's (an omitted one is the maker's own), or 403 naming what would exceed it.
 */
function withinMaker(maker: Caller, asked: { limits: KeyLimits; scopes: string[]; expiresAt: Date | null }): { limits: KeyLimits; scopes: string[]; expiresAt: Date | null } {
  const own: KeyLimits = { rpm: maker.rpm ?? null, read_rpm: maker.readRpm ?? null, tpm: maker.tpm ?? null, max_concurrent: maker.maxConcurrent ?? null };
  const limits = { ...asked.limits };
  for (const k of LIMIT_NAMES) {
    const cap = own[k];
    if (cap === null) continue;
    if (limits[k] === null) limits[k] = cap;
    else if (limits[k] > cap) throw ApiError.forbidden(`limits.${k} must not exceed ${cap}, the limit of the key making it (${maker.keyPrefix})`);
  }
  let scopes = asked.scopes;
  const makerScopes = maker.scopes ?? [];
  if (makerScopes.length > 0) {
    if (scopes.length === 0) scopes = [...makerScopes];
    const beyond = scopes.filter((s) => !makerScopes.includes(s));
    if (beyond.length) throw ApiError.forbidden(`scopes ${beyond.join(', ')} are beyond the key making it (${maker.keyPrefix}), which has ${makerScopes.join(', ')}`);
  }
  let expiresAt = asked.expiresAt;
  if (maker.expiresAt !== undefined) {
    if (expiresAt === null) expiresAt = new Date(maker.expiresAt);
    else if (expiresAt.getTime() > maker.expiresAt)
      throw ApiError.forbidden(`expires_at must not be later than ${new Date(maker.expiresAt).toISOString()}, when the key making it (${maker.keyPrefix}) expires`);
  }
  return { limits, scopes, expiresAt };
}

/** The maker's own limits, then those of the keys above it: a new key's requests count against all of them. */
function limitChainOf(maker: Caller): Prisma.InputJsonValue | typeof Prisma.DbNull {
  const chain = [
    { prefix: maker.keyPrefix, rpm: maker.rpm ?? null, read_rpm: maker.readRpm ?? null, tpm: maker.tpm ?? null, max_concurrent: maker.maxConcurrent ?? null },
    ...(maker.makerLimits ?? []).map((m) => ({ prefix: m.keyPrefix, rpm: m.rpm ?? null, read_rpm: m.readRpm ?? null, tpm: m.tpm ?? null, max_concurrent: m.maxConcurrent ?? null })),
  ].filter((l) => l.rpm !== null || l.read_rpm !== null || l.tpm !== null || l.max_concurrent !== null);
  return chain.length > 0 ? chain : Prisma.DbNull;
}

/**
 * A key with a budget hands part of it to a key it makes: the new key's max_spend comes off the
 * maker's, and must fit what the maker has left in its current period (max_spend - spent -
 * held), in the same period. Together the two can then never spend more than the maker could
 * alone. Decided under the maker's row lock (AccountKeysRepository.createCarved), so concurrent
 * makes (and its own spending, which takes the same lock) cannot both take the same credits.
 * What to take off the maker's max_spend, or a 403 naming the rule.
 */
function carveBudget(maker: Caller, makerBudget: MakerBudget | undefined, budget: { max_spend: string; period: BudgetPeriod } | null): string | undefined {
  if (!makerBudget) return undefined;
  const left = Prisma.Decimal.max(new Prisma.Decimal(makerBudget.left), 0);
  const period = makerBudget.period;
  if (!budget)
    throw ApiError.forbidden(`The key making it (${maker.keyPrefix}) has a budget: give the new key a budget of its own, at most ${left.toFixed()} per ${period} (what it has left)`);
  if (budget.period !== period) throw ApiError.forbidden(`budget.period must be '${period}', the period of the budget of the key making it (${maker.keyPrefix})`);
  if (new Prisma.Decimal(budget.max_spend).gt(left))
    throw ApiError.forbidden(`budget.max_spend must not exceed ${left.toFixed()}, what the key making it (${maker.keyPrefix}) has left of its budget this ${period === 'total' ? 'lifetime' : period}`);
  return budget.max_spend;
}

/** `limits`: `rpm` (requests that create work per minute), `read_rpm` (other requests per minute), `tpm` (chat tokens per minute), `max_concurrent` (in flight plus active generations). */
function keyLimits(limits: unknown, problems: Problems): KeyLimits {
  const none = { rpm: null, read_rpm: null, tpm: null, max_concurrent: null };
  if (limits === undefined || limits === null) return none;
  if (typeof limits !== 'object' || Array.isArray(limits)) {
    problems.push({ field: 'limits', message: 'must be an object such as {"rpm": 60, "read_rpm": 600, "tpm": 100000, "max_concurrent": 4}' });
    return none;
  }
  const l = limits as Record<string, unknown>;
  for (const k of Object.keys(l)) if (!(LIMIT_NAMES as readonly string[]).includes(k)) problems.push({ field: `limits.${k}`, message: 'is not a limit' });
  const one = (k: (typeof LIMIT_NAMES)[number], max: number): number | null => {
    if (l[k] === undefined || l[k] === null) return null;
    if (typeof l[k] !== 'number' || !Number.isInteger(l[k]) || (l[k] as number) < 1 || (l[k] as number) > max) {
      problems.push({ field: `limits.${k}`, message: `must be an integer between 1 and ${max}` });
      return null;
    }
    return l[k] as number;
  };
  return { rpm: one('rpm', 1_000_000), read_rpm: one('read_rpm', 1_000_000), tpm: one('tpm', 1_000_000_000), max_concurrent: one('max_concurrent', 100_000) };
}

/** `budget`: `{"max_spend": "<decimal>", "period": "day" | "month" | "total"}`. */
function keyBudget(budget: unknown, problems: Problems): { max_spend: string; period: BudgetPeriod } | null {
  if (budget === undefined || budget === null) return null;
  if (typeof budget !== 'object' || Array.isArray(budget)) {
    problems.push({ field: 'budget', message: 'must be an object such as {"max_spend": "25.00", "period": "month"}' });
    return null;
  }
  const b = budget as Record<string, unknown>;
  for (const k of Object.keys(b)) if (k !== 'max_spend' && k !== 'period') problems.push({ field: `budget.${k}`, message: 'is not a field of a budget' });
  const spend = typeof b.max_spend === 'number' && Number.isFinite(b.max_spend) && b.max_spend >= 0 ? String(b.max_spend) : b.max_spend;
  let ok = true;
  if (typeof spend !== 'string' || !DECIMAL_PATTERN.test(spend) || spend.startsWith('-') || new Prisma.Decimal(spend).greaterThan('99999999999999')) {
    problems.push({ field: 'budget.max_spend', message: 'must be a non-negative decimal string with at most 6 decimal places, such as "25.00"' });
    ok = false;
  }
  if (!(BUDGET_PERIODS as readonly unknown[]).includes(b.period)) {
    problems.push({ field: 'budget.period', message: `must be one of ${BUDGET_PERIODS.join(', ')}` });
    ok = false;
  }
  return ok ? { max_spend: new Prisma.Decimal(spend as string).toFixed(), period: b.period as BudgetPeriod } : null;
}

function expiry(value: unknown, problems: { field: string; message: string }[]): Date | null {
  if (value === undefined || value === null) return null;
  const ms = parseApiInstant(value)?.getTime() ?? NaN;
  if (!Number.isFinite(ms)) problems.push({ field: 'expires_at', message: 'must be an ISO 8601 time or Unix seconds' });
  else if (ms <= Date.now()) problems.push({ field: 'expires_at', message: 'must be in the future' });
  else if (ms > Date.now() + MAX_LIFETIME_MS) problems.push({ field: 'expires_at', message: 'must be within 5 years' });
  else return new Date(ms);
  return null;
}

/** The period a budget counts now, as Postgres names it (credit-statements.ts): UTC day, month, or "total". */
function currentWindow(period: string, now = new Date()): string {
  const iso = now.toISOString();
  return period === 'day' ? iso.slice(0, 10) : period === 'month' ? iso.slice(0, 7) : 'total';
}

function view(row: ApiKeyModel, namespace: string): ApiKeyView {
  const limits = {
    ...(row.rpm !== null && { rpm: row.rpm }),
    ...(row.readRpm !== null && { read_rpm: row.readRpm }),
    ...(row.tpm !== null && { tpm: row.tpm }),
    ...(row.maxConcurrent !== null && { max_concurrent: row.maxConcurrent }),
  };
  const period = row.budgetPeriod as BudgetPeriod | null;
  return {
    prefix: row.prefix,
    name: row.name,
    namespace,
    scopes: row.scopes.length > 0 ? row.scopes : null,
    expires_at: row.expiresAt?.toISOString() ?? null,
    limits: Object.keys(limits).length > 0 ? limits : null,
    budget:
      row.budgetMaxSpend !== null && period !== null
        ? {
            max_spend: new Prisma.Decimal(row.budgetMaxSpend).toFixed(),
            period,
            spent: row.budgetWindow === currentWindow(period) ? new Prisma.Decimal(row.budgetSpent).toFixed() : '0',
          }
        : null,
    store: !row.storeRefused,
    created_at: row.createdAt.toISOString(),
    last_used_at: row.lastUsedAt?.toISOString() ?? null,
  };
}
