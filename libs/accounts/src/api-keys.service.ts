import { Injectable } from '@nestjs/common';
import { API_SCOPES, generateApiKey, NamespaceAccess, type Caller } from '@atelier/auth';
import { ApiError } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { AccountsService } from './accounts.service';

/** Longest lifetime a self-service key may be given. */
const MAX_LIFETIME_MS = 5 * 365 * 24 * 3600 * 1000;

export interface ApiKeyView {
  prefix: string;
  name: string | null;
  namespace: string;
  /** null: every scope. */
  scopes: string[] | null;
  expires_at: string | null;
  limits: { rpm?: number; tpm?: number } | null;
  budget: null;
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
    private readonly prisma: PrismaService,
    private readonly access: NamespaceAccess,
    private readonly accounts: AccountsService,
  ) {}

  async create(caller: Caller, rawBody: unknown): Promise<ApiKeyView & { api_key: string }> {
    if (rawBody === null || typeof rawBody !== 'object' || Array.isArray(rawBody)) throw ApiError.badRequest('Request body must be a JSON object');
    const body = rawBody as Record<string, unknown>;
    const problems: { field: string; message: string }[] = [];
    const unknown = Object.keys(body).filter((k) => !['name', 'namespace', 'expires_at', 'scopes', 'limits', 'budget'].includes(k));
    for (const k of unknown) problems.push({ field: k, message: 'is not a field of an API key' });
    if (body.budget !== undefined && body.budget !== null) problems.push({ field: 'budget', message: 'is not supported yet: keys carry no budgets of their own' });
    const limits = keyLimits(body.limits, problems);
    if (typeof body.name !== 'string' || body.name.trim() === '' || body.name.length > 100) problems.push({ field: 'name', message: 'must be a string of 1 to 100 characters' });
    const expiresAt = expiry(body.expires_at, problems);
    let scopes: string[] = [];
    if (body.scopes !== undefined && body.scopes !== null) {
      if (!Array.isArray(body.scopes) || body.scopes.length === 0 || body.scopes.some((s) => !(API_SCOPES as readonly unknown[]).includes(s)))
        problems.push({ field: 'scopes', message: `must be a non-empty array of ${API_SCOPES.join(', ')}` });
      else scopes = [...new Set(body.scopes as string[])];
    }
    if (problems.length) throw ApiError.badRequest(problems.map((p) => `${p.field} ${p.message}`).join('; '), { fields: problems });
    const scope = await this.access.resolve(caller, body.namespace ?? caller.username);
    const own = await this.prisma.namespace.findUnique({ where: { id: scope.id }, select: { rpm: true, tpm: true } });
    for (const k of ['rpm', 'tpm'] as const) {
      const cap = own?.[k] ?? null;
      if (limits[k] !== null && cap !== null && limits[k] > cap)
        throw ApiError.badRequest(`limits.${k} must not exceed the namespace's own limit of ${cap}`, { fields: [{ field: `limits.${k}`, message: `must be at most ${cap}` }] });
    }
    const key = generateApiKey();
    const row = await this.prisma.apiKey.create({
      data: { userId: caller.userId, prefix: key.prefix, hash: key.hash, name: (body.name as string).trim(), namespaceId: scope.id, scopes, expiresAt, rpm: limits.rpm, tpm: limits.tpm },
    });
    return { api_key: key.key, ...view(row, scope.name) };
  }

  /** The caller's keys that still work or expired (not revoked), newest first, without secrets. */
  async list(caller: Caller): Promise<{ data: ApiKeyView[] }> {
    const rows = await this.prisma.apiKey.findMany({ where: { userId: caller.userId, revokedAt: null }, orderBy: { createdAt: 'desc' } });
    const ids = [...new Set(rows.map((r) => r.namespaceId).filter((id): id is string => id !== null))];
    const names = new Map((await this.prisma.namespace.findMany({ where: { id: { in: ids } }, select: { id: true, name: true } })).map((n) => [n.id, n.name]));
    const own = (await this.prisma.namespace.findUnique({ where: { userId: caller.userId }, select: { name: true } }))?.name ?? caller.username;
    return { data: rows.map((r) => view(r, r.namespaceId ? (names.get(r.namespaceId) ?? own) : own)) };
  }

  /** Revokes one of the caller's own keys; anyone else's looks unknown (404). */
  async revoke(caller: Caller, prefix: string): Promise<{ prefix: string; revoked_at: number }> {
    const key = await this.prisma.apiKey.findUnique({ where: { prefix }, select: { userId: true } });
    if (!key || key.userId !== caller.userId) throw ApiError.notFound(`API key not found: ${prefix}`);
    return this.accounts.revokeApiKey(prefix);
  }
}

/** `limits`: `rpm` (requests per minute) and `tpm` (chat tokens per minute); max_concurrent is not built yet. */
function keyLimits(limits: unknown, problems: { field: string; message: string }[]): { rpm: number | null; tpm: number | null } {
  const none = { rpm: null, tpm: null };
  if (limits === undefined || limits === null) return none;
  if (typeof limits !== 'object' || Array.isArray(limits)) {
    problems.push({ field: 'limits', message: 'must be an object such as {"rpm": 60, "tpm": 100000}' });
    return none;
  }
  const l = limits as Record<string, unknown>;
  for (const k of Object.keys(l)) if (k !== 'rpm' && k !== 'tpm') problems.push({ field: `limits.${k}`, message: k === 'max_concurrent' ? 'is not supported yet' : 'is not a limit' });
  const one = (k: 'rpm' | 'tpm', max: number): number | null => {
    if (l[k] === undefined || l[k] === null) return null;
    if (typeof l[k] !== 'number' || !Number.isInteger(l[k]) || (l[k] as number) < 1 || (l[k] as number) > max) {
      problems.push({ field: `limits.${k}`, message: `must be an integer between 1 and ${max}` });
      return null;
    }
    return l[k] as number;
  };
  return { rpm: one('rpm', 1_000_000), tpm: one('tpm', 1_000_000_000) };
}

function expiry(value: unknown, problems: { field: string; message: string }[]): Date | null {
  if (value === undefined || value === null) return null;
  const ms = typeof value === 'number' ? value * 1000 : typeof value === 'string' && /^\d{4}-\d\d-\d\d/.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms)) problems.push({ field: 'expires_at', message: 'must be an ISO 8601 time or Unix seconds' });
  else if (ms <= Date.now()) problems.push({ field: 'expires_at', message: 'must be in the future' });
  else if (ms > Date.now() + MAX_LIFETIME_MS) problems.push({ field: 'expires_at', message: 'must be within 5 years' });
  else return new Date(ms);
  return null;
}

function view(
  row: { prefix: string; name: string | null; scopes: string[]; expiresAt: Date | null; createdAt: Date; lastUsedAt: Date | null; rpm: number | null; tpm: number | null },
  namespace: string,
): ApiKeyView {
  return {
    prefix: row.prefix,
    name: row.name,
    namespace,
    scopes: row.scopes.length > 0 ? row.scopes : null,
    expires_at: row.expiresAt?.toISOString() ?? null,
    limits: row.rpm === null && row.tpm === null ? null : { ...(row.rpm !== null && { rpm: row.rpm }), ...(row.tpm !== null && { tpm: row.tpm }) },
    budget: null,
    created_at: row.createdAt.toISOString(),
    last_used_at: row.lastUsedAt?.toISOString() ?? null,
  };
}
