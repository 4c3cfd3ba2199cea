import { Injectable } from '@nestjs/common';
import { generateApiKey, LimitChanges } from '@atelier/auth';
import { budgetSpentNowSql, CreditLedger } from '@atelier/billing';
import {
  API_KEY_REVOKED_CHANNEL,
  ApiError,
  type CreatedApiKeyResponse,
  type CreatedOrgResponse,
  type CreatedUserResponse,
  type NamespaceResponse,
} from '@atelier/contracts';
import { Prisma, PrismaService } from '@atelier/db';
import { BroadcastBus } from '@atelier/runtime';
import { QueueWeights } from './queue-weights.service';

function isUniqueViolation(err: unknown): boolean {
  return err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002';
}

/** A namespace starting with `credits`, its opening balance recorded in the ledger. */
async function createFundedNamespace(
  tx: Prisma.TransactionClient,
  data: { name: string; type: 'user' | 'org'; userId?: string; orgId?: string },
  credits = '0',
) {
  const ns = await tx.namespace.create({ data: { ...data, credits } });
  if (new Prisma.Decimal(credits).greaterThan(0))
    await tx.creditLedgerEntry.create({
      data: { namespaceId: ns.id, kind: 'grant', amount: credits, balanceAfter: credits, reference: 'initial credits' },
    });
  return ns;
}

/** Users, organizations, namespaces and API keys: what the operator interface manages. */
/** A membership change: whether the user is now a member, and the keys of theirs it revoked. */
export interface OrgMembership {
  org: string;
  username: string;
  member: boolean;
  revoked_keys: string[];
}

@Injectable()
export class AccountsService {
  constructor(
    private readonly prisma: PrismaService,
    private readonly ledger: CreditLedger,
    private readonly bus: BroadcastBus,
    private readonly limitChanges: LimitChanges,
    private readonly queueWeights: QueueWeights,
  ) {}

  /** A user, their own namespace (named after them) and a first API key, in one transaction. */
  async createUser(username: string, credits?: string): Promise<CreatedUserResponse> {
    const key = generateApiKey();
    try {
      await this.prisma.$transaction(async (tx) => {
        const user = await tx.user.create({ data: { username } });
        await createFundedNamespace(tx, { name: username, type: 'user', userId: user.id }, credits);
        await tx.apiKey.create({ data: { userId: user.id, prefix: key.prefix, hash: key.hash } });
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw ApiError.conflict(`Namespace '${username}' already exists`);
      throw err;
    }
    return { username, namespace: username, api_key: key.key };
  }

  async createApiKey(username: string): Promise<CreatedApiKeyResponse> {
    const user = await this.prisma.user.findUnique({ where: { username }, select: { id: true } });
    if (!user) throw ApiError.notFound(`User not found: ${username}`);
    const key = generateApiKey();
    await this.prisma.apiKey.create({ data: { userId: user.id, prefix: key.prefix, hash: key.hash } });
    return { api_key: key.key, prefix: key.prefix };
  }

  /** Idempotent; the broadcast makes every replica drop the key from its auth cache at once. */
  /**
   * Revokes a key and every key made with it, at any depth (a key's children were made by whoever
   * held it), in one transaction; each is broadcast, so every replica drops it at once. What a
   * revoked key had not spent or reserved of a budget carved from its maker goes back to the maker,
   * deepest first, so a revoked subtree returns its whole unspent part to the key above it.
   */
  async revokeApiKey(prefix: string): Promise<{ prefix: string; revoked_at: number; revoked_keys: string[] }> {
    const key = await this.prisma.apiKey.findUnique({ where: { prefix } });
    if (!key) throw ApiError.notFound(`API key not found: ${prefix}`);
    const { revokedAt, prefixes } = await this.prisma.$transaction(async (tx) => {
      const tree = await tx.$queryRaw<{ id: string; prefix: string; parent_id: string | null; depth: number; revoked: boolean }[]>`
        WITH RECURSIVE tree AS (
          SELECT id, prefix, parent_id, 0 AS depth FROM api_keys WHERE id = ${key.id}::uuid
          UNION ALL
          SELECT k.id, k.prefix, k.parent_id, t.depth + 1 FROM api_keys k JOIN tree t ON k.parent_id = t.id
        )
        SELECT t.id::text, t.prefix, t.parent_id::text, t.depth, a.revoked_at IS NOT NULL AS revoked
          FROM tree t JOIN api_keys a ON a.id = t.id ORDER BY t.depth DESC`;
      const now = new Date();
      for (const k of tree) {
        if (k.revoked) continue;
        // Locks the key, then hands its unspent budget (never below zero) to its maker when both budgets count the same period.
        await tx.$executeRaw`
          WITH me AS (
            SELECT id, parent_id, budget_period,
                   GREATEST(budget_max_spend - budget_reserved - ${Prisma.raw(budgetSpentNowSql('api_keys'))}, 0) AS unspent
              FROM api_keys WHERE id = ${k.id}::uuid AND revoked_at IS NULL FOR UPDATE
          ), done AS (
            UPDATE api_keys SET revoked_at = ${now} WHERE id IN (SELECT id FROM me) RETURNING id
          )
          UPDATE api_keys p SET budget_max_spend = p.budget_max_spend + me.unspent
            FROM me WHERE p.id = me.parent_id AND p.revoked_at IS NULL AND me.unspent IS NOT NULL
             AND p.budget_max_spend IS NOT NULL AND p.budget_period = me.budget_period`;
      }
      const root = tree.find((k) => k.id === key.id)!;
      return { revokedAt: root.revoked ? key.revokedAt! : now, prefixes: tree.filter((k) => !k.revoked).map((k) => k.prefix) };
    });
    for (const revoked of prefixes.length ? prefixes : [prefix]) await this.bus.publish(API_KEY_REVOKED_CHANNEL, { prefix: revoked });
    return { prefix, revoked_at: Math.floor(revokedAt.getTime() / 1000), revoked_keys: prefixes.filter((p) => p !== prefix) };
  }

  /** Adds a user to an org (a member already: unchanged). */
  async addMember(org: string, username: string): Promise<OrgMembership> {
    const { orgId, userId } = await this.orgAndUser(org, username);
    await this.prisma.membership.upsert({ where: { orgId_userId: { orgId, userId } }, create: { orgId, userId }, update: {} });
    return { org, username, member: true, revoked_keys: [] };
  }

  /**
   * Takes a user out of an org, and revokes their keys that bill to it, in one transaction: the
   * revocation broadcast drops them from every replica's cache at once, and the membership check
   * in each key's lookup refuses a key bound to the org within AUTH_CACHE_MS in any case. A user
   * who is not a member: unchanged, or with `onlyMember` (a member leaving) 404, as if the org
   * did not exist, so the route tells nobody which orgs exist.
   */
  async removeMember(org: string, username: string, onlyMember = false): Promise<OrgMembership> {
    const { orgId, userId } = await this.orgAndUser(org, username).catch((err: unknown) => {
      throw onlyMember ? ApiError.notFound(`You are not a member of an organization named ${org}`) : err;
    });
    const revoked = await this.prisma.$transaction(async (tx) => {
      const { count } = await tx.membership.deleteMany({ where: { orgId, userId } });
      if (count === 0 && onlyMember) throw ApiError.notFound(`You are not a member of an organization named ${org}`);
      return tx.$queryRaw<{ prefix: string }[]>`
        UPDATE api_keys k SET revoked_at = now() FROM namespaces n
        WHERE n.org_id = ${orgId}::uuid AND k.namespace_id = n.id AND k.user_id = ${userId}::uuid AND k.revoked_at IS NULL
        RETURNING k.prefix`;
    });
    for (const { prefix } of revoked) await this.bus.publish(API_KEY_REVOKED_CHANNEL, { prefix });
    return { org, username, member: false, revoked_keys: revoked.map((r) => r.prefix).sort() };
  }

  private async orgAndUser(org: string, username: string): Promise<{ orgId: string; userId: string }> {
    const [found, user] = await Promise.all([
      this.prisma.organization.findUnique({ where: { name: org }, select: { id: true } }),
      this.prisma.user.findUnique({ where: { username }, select: { id: true } }),
    ]);
    if (!found) throw ApiError.notFound(`Organization not found: ${org}`);
    if (!user) throw ApiError.notFound(`User not found: ${username}`);
    return { orgId: found.id, userId: user.id };
  }

  async createOrg(name: string, members: string[], credits?: string): Promise<CreatedOrgResponse> {
    const unique = [...new Set(members)];
    const users = await this.prisma.user.findMany({ where: { username: { in: unique } }, select: { id: true, username: true } });
    const missing = unique.filter((m) => !users.some((u) => u.username === m));
    if (missing.length) throw ApiError.notFound(`Unknown user(s): ${missing.join(', ')}`);
    try {
      await this.prisma.$transaction(async (tx) => {
        const org = await tx.organization.create({ data: { name } });
        await createFundedNamespace(tx, { name, type: 'org', orgId: org.id }, credits);
        await tx.membership.createMany({ data: users.map((u) => ({ orgId: org.id, userId: u.id })) });
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw ApiError.conflict(`Namespace '${name}' already exists`);
      throw err;
    }
    return { name, namespace: name, members: unique, credits: new Prisma.Decimal(credits ?? 0).toFixed() };
  }

  async adjustCredits(namespace: string, amount: string): Promise<{ namespace: string; credits: string }> {
    const ns = await this.findNamespace(namespace);
    const balance = await this.ledger.adjust(ns.id, amount, 'operator adjustment');
    return { namespace, credits: balance.credits };
  }

  /** Sets the limits given (null removes one); the others stay. */
  async setLimits(
    namespace: string,
    limits: { rpm?: number | null; read_rpm?: number | null; tpm?: number | null; max_concurrent?: number | null; queue_weight?: number | null },
  ): Promise<{ namespace: string; limits: { rpm: number | null; read_rpm: number | null; tpm: number | null; max_concurrent: number | null; queue_weight: number } }> {
    const ns = await this.findNamespace(namespace);
    const row = await this.prisma.namespace.update({
      where: { id: ns.id },
      data: { rpm: limits.rpm, readRpm: limits.read_rpm, tpm: limits.tpm, maxConcurrent: limits.max_concurrent, queueWeight: limits.queue_weight },
      select: { rpm: true, readRpm: true, tpm: true, maxConcurrent: true, queueWeight: true },
    });
    // Every replica has dropped what it cached of this namespace's keys before the answer goes out.
    await this.limitChanges.announce(ns.id);
    // The weight is read where generations are placed in the fair order (Redis); the column is its durable copy.
    if (limits.queue_weight !== undefined) await this.queueWeights.set(ns.id, row.queueWeight);
    return { namespace, limits: { rpm: row.rpm, read_rpm: row.readRpm, tpm: row.tpm, max_concurrent: row.maxConcurrent, queue_weight: row.queueWeight ?? 1 } };
  }

  async describeNamespace(namespace: string): Promise<NamespaceResponse> {
    const ns = await this.findNamespace(namespace);
    return {
      namespace: ns.name,
      type: ns.type,
      credits: new Prisma.Decimal(ns.credits).toFixed(),
      reserved: new Prisma.Decimal(ns.reserved).toFixed(),
    };
  }

  /** The namespace of that name, or 404. */
  async findNamespace(name: string) {
    const ns = await this.prisma.namespace.findUnique({ where: { name } });
    if (!ns) throw ApiError.notFound(`Namespace not found: ${name}`);
    return ns;
  }
}
