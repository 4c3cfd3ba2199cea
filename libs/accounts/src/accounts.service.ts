import { Injectable } from '@nestjs/common';
import { generateApiKey, LimitChanges } from '@atelier/auth';
import { CreditLedger } from '@atelier/billing';
import {
  API_KEY_REVOKED_CHANNEL,
  ApiError,
  type CreatedApiKeyResponse,
  type CreatedOrgResponse,
  type CreatedUserResponse,
  type NamespaceResponse,
} from '@atelier/contracts';
import { Prisma } from '@atelier/db';
import { BroadcastBus } from '@atelier/runtime';
import { AccountKeysRepository } from './account-keys.repository';
import { AccountsRepository } from './accounts.repository';
import { QueueWeights } from './queue-weights.service';

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
    private readonly accounts: AccountsRepository,
    private readonly keys: AccountKeysRepository,
    private readonly ledger: CreditLedger,
    private readonly bus: BroadcastBus,
    private readonly limitChanges: LimitChanges,
    private readonly queueWeights: QueueWeights,
  ) {}

  /** A user, their own namespace (named after them) and a first API key, in one transaction. */
  async createUser(username: string, credits?: string): Promise<CreatedUserResponse> {
    const key = generateApiKey();
    if (!(await this.accounts.createUser(username, credits, key))) throw ApiError.conflict(`Namespace '${username}' already exists`);
    return { username, namespace: username, api_key: key.key };
  }

  async createApiKey(username: string): Promise<CreatedApiKeyResponse> {
    const userId = await this.accounts.userId(username);
    if (!userId) throw ApiError.notFound(`User not found: ${username}`);
    const key = generateApiKey();
    await this.keys.create({ userId, prefix: key.prefix, hash: key.hash });
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
    const key = await this.keys.byPrefix(prefix);
    if (!key) throw ApiError.notFound(`API key not found: ${prefix}`);
    const now = new Date();
    const { prefixes, alreadyRevoked } = await this.keys.revokeTree(key.id, now);
    const revokedAt = alreadyRevoked ? key.revokedAt! : now;
    for (const revoked of prefixes.length ? prefixes : [prefix]) await this.bus.publish(API_KEY_REVOKED_CHANNEL, { prefix: revoked });
    return { prefix, revoked_at: Math.floor(revokedAt.getTime() / 1000), revoked_keys: prefixes.filter((p) => p !== prefix) };
  }

  /** Adds a user to an org (a member already: unchanged). */
  async addMember(org: string, username: string): Promise<OrgMembership> {
    const { orgId, userId } = await this.orgAndUser(org, username);
    await this.accounts.addMember(orgId, userId);
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
    const revoked = await this.accounts.removeMember(orgId, userId, onlyMember);
    if (!revoked) throw ApiError.notFound(`You are not a member of an organization named ${org}`);
    for (const prefix of revoked) await this.bus.publish(API_KEY_REVOKED_CHANNEL, { prefix });
    return { org, username, member: false, revoked_keys: [...revoked].sort() };
  }

  private async orgAndUser(org: string, username: string): Promise<{ orgId: string; userId: string }> {
    const [orgId, userId] = await Promise.all([this.accounts.orgId(org), this.accounts.userId(username)]);
    if (!orgId) throw ApiError.notFound(`Organization not found: ${org}`);
    if (!userId) throw ApiError.notFound(`User not found: ${username}`);
    return { orgId, userId };
  }

  async createOrg(name: string, members: string[], credits?: string): Promise<CreatedOrgResponse> {
    const unique = [...new Set(members)];
    const users = await this.accounts.users(unique);
    const missing = unique.filter((m) => !users.some((u) => u.username === m));
    if (missing.length) throw ApiError.notFound(`Unknown user(s): ${missing.join(', ')}`);
    if (!(await this.accounts.createOrg(name, users.map((u) => u.id), credits))) throw ApiError.conflict(`Namespace '${name}' already exists`);
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
    limits: { rpm?: number | null; read_rpm?: number | null; tpm?: number | null; max_concurrent?: number | null; queue_weight?: number | null; capture_rate?: number | null },
  ): Promise<{
    namespace: string;
    limits: { rpm: number | null; read_rpm: number | null; tpm: number | null; max_concurrent: number | null; queue_weight: number; capture_rate: number };
  }> {
    const ns = await this.findNamespace(namespace);
    const row = await this.accounts.setNamespaceLimits(ns.id, {
      rpm: limits.rpm,
      readRpm: limits.read_rpm,
      tpm: limits.tpm,
      maxConcurrent: limits.max_concurrent,
      queueWeight: limits.queue_weight,
      captureRate: limits.capture_rate,
    });
    // Every replica has dropped what it cached of this namespace's keys before the answer goes out.
    await this.limitChanges.announce(ns.id);
    // The weight is read where generations are placed in the fair order (Redis); the column is its durable copy.
    if (limits.queue_weight !== undefined) await this.queueWeights.set(ns.id, row.queueWeight);
    return { namespace, limits: { rpm: row.rpm, read_rpm: row.readRpm, tpm: row.tpm, max_concurrent: row.maxConcurrent, queue_weight: row.queueWeight ?? 1, capture_rate: row.captureRate ?? 0 } };
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
    const ns = await this.accounts.namespaceByName(name);
    if (!ns) throw ApiError.notFound(`Namespace not found: ${name}`);
    return ns;
  }
}
