import { Injectable } from '@nestjs/common';
import { Prisma, PrismaService, type NamespaceModel } from '@atelier/db';

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

export interface NamespaceLimitsRow {
  rpm: number | null;
  readRpm: number | null;
  tpm: number | null;
  maxConcurrent: number | null;
  queueWeight: number | null;
  captureRate: number | null;
}

/** Users, organizations, their memberships and namespaces, as the operator's account operations write them. */
@Injectable()
export class AccountsRepository {
  constructor(private readonly prisma: PrismaService) {}

  /**
   * A user, their own namespace (named `username`, funded with `credits`) and a first key, in one
   * transaction; false when the name is taken (by a user or any namespace).
   */
  async createUser(username: string, credits: string | undefined, key: { prefix: string; hash: string }): Promise<boolean> {
    try {
      await this.prisma.$transaction(async (tx) => {
        const user = await tx.user.create({ data: { username } });
        await createFundedNamespace(tx, { name: username, type: 'user', userId: user.id }, credits);
        await tx.apiKey.create({ data: { userId: user.id, prefix: key.prefix, hash: key.hash } });
      });
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  /** An org, its namespace (named `name`, funded with `credits`) and its first members, in one transaction; false when the name is taken. */
  async createOrg(name: string, memberIds: string[], credits: string | undefined): Promise<boolean> {
    try {
      await this.prisma.$transaction(async (tx) => {
        const org = await tx.organization.create({ data: { name } });
        await createFundedNamespace(tx, { name, type: 'org', orgId: org.id }, credits);
        await tx.membership.createMany({ data: memberIds.map((userId) => ({ orgId: org.id, userId })) });
      });
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  async userId(username: string): Promise<string | undefined> {
    return (await this.prisma.user.findUnique({ where: { username }, select: { id: true } }))?.id;
  }

  /** The users of these names that exist. */
  users(usernames: string[]): Promise<{ id: string; username: string }[]> {
    return this.prisma.user.findMany({ where: { username: { in: usernames } }, select: { id: true, username: true } });
  }

  /** A user and their own namespace (undefined when either is missing). */
  async userWithNamespace(username: string): Promise<{ id: string; namespace: { id: string; name: string } } | undefined> {
    const user = await this.prisma.user.findUnique({ where: { username }, include: { namespace: { select: { id: true, name: true } } } });
    return user?.namespace ? { id: user.id, namespace: user.namespace } : undefined;
  }

  async orgId(name: string): Promise<string | undefined> {
    return (await this.prisma.organization.findUnique({ where: { name }, select: { id: true } }))?.id;
  }

  /** Adds the membership (already there: unchanged). */
  async addMember(orgId: string, userId: string): Promise<void> {
    await this.prisma.membership.upsert({ where: { orgId_userId: { orgId, userId } }, create: { orgId, userId }, update: {} });
  }

  /**
   * Removes the membership and revokes the user's live keys that bill to the org's namespace, in
   * one transaction; the prefixes revoked. With `onlyMember`, a user who was not a member changes
   * nothing and gets undefined.
   */
  async removeMember(orgId: string, userId: string, onlyMember: boolean): Promise<string[] | undefined> {
    return this.prisma.$transaction(async (tx) => {
      const { count } = await tx.membership.deleteMany({ where: { orgId, userId } });
      if (count === 0 && onlyMember) return undefined;
      const rows = await tx.$queryRaw<{ prefix: string }[]>`
        UPDATE api_keys k SET revoked_at = now() FROM namespaces n
        WHERE n.org_id = ${orgId}::uuid AND k.namespace_id = n.id AND k.user_id = ${userId}::uuid AND k.revoked_at IS NULL
        RETURNING k.prefix`;
      return rows.map((r) => r.prefix);
    });
  }

  namespaceByName(name: string): Promise<NamespaceModel | null> {
    return this.prisma.namespace.findUnique({ where: { name } });
  }

  /** The namespace's own limits (undefined when it is gone). */
  async namespaceLimits(id: string): Promise<Omit<NamespaceLimitsRow, 'queueWeight' | 'captureRate'> | undefined> {
    return (await this.prisma.namespace.findUnique({ where: { id }, select: { rpm: true, readRpm: true, tpm: true, maxConcurrent: true } })) ?? undefined;
  }

  /** Sets the limits given (undefined leaves one, null removes it); all of them after. */
  setNamespaceLimits(id: string, limits: Partial<NamespaceLimitsRow>): Promise<NamespaceLimitsRow> {
    return this.prisma.namespace.update({
      where: { id },
      data: limits,
      select: { rpm: true, readRpm: true, tpm: true, maxConcurrent: true, queueWeight: true, captureRate: true },
    });
  }

  /** Names of these namespaces, by id. */
  async namespaceNames(ids: string[]): Promise<Map<string, string>> {
    const rows = await this.prisma.namespace.findMany({ where: { id: { in: ids } }, select: { id: true, name: true } });
    return new Map(rows.map((n) => [n.id, n.name]));
  }

  /** The name of the user's own namespace. */
  async ownNamespaceName(userId: string): Promise<string | undefined> {
    return (await this.prisma.namespace.findUnique({ where: { userId }, select: { name: true } }))?.name;
  }
}
