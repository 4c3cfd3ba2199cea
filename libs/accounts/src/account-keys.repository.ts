import { Injectable } from '@nestjs/common';
import { budgetSpentNowSql } from '@atelier/billing';
import { Prisma, PrismaService, type ApiKeyModel } from '@atelier/db';

/** A key's row as it is made (api_keys' columns, by their Prisma names). */
export type NewApiKey = Prisma.ApiKeyUncheckedCreateInput;

/** What the maker key's budget holds now, read under its row lock. */
export interface MakerBudget {
  maxSpend: string;
  period: 'day' | 'month' | 'total';
  /** max_spend - held - spent in the current period; may be negative. */
  left: string;
}

/** The api_keys rows as their owners and the operator manage them: made, listed, revoked. */
@Injectable()
export class AccountKeysRepository {
  constructor(private readonly prisma: PrismaService) {}

  create(data: NewApiKey): Promise<ApiKeyModel> {
    return this.prisma.apiKey.create({ data });
  }

  /**
   * Makes `data` a key carved from the budget of the key `makerId`: under the maker's row lock
   * (which its own spending takes too), `decide` sees what the maker has left and either throws
   * (nothing changes) or returns how much to take off the maker's max_spend. A maker without a
   * budget: `decide` gets undefined and nothing is taken.
   */
  createCarved(makerId: string, data: NewApiKey, decide: (budget: MakerBudget | undefined) => string | undefined): Promise<ApiKeyModel> {
    return this.prisma.$transaction(async (tx) => {
      const [row] = await tx.$queryRaw<{ max_spend: string | null; period: MakerBudget['period'] | null; left: string | null }[]>`
        SELECT budget_max_spend::text AS max_spend, budget_period AS period,
               (budget_max_spend - budget_reserved - ${Prisma.raw(budgetSpentNowSql('api_keys'))})::text AS left
        FROM api_keys WHERE id = ${makerId}::uuid FOR UPDATE`;
      const take = decide(row?.max_spend && row.period ? { maxSpend: row.max_spend, period: row.period, left: row.left ?? '0' } : undefined);
      if (take !== undefined) await tx.$executeRaw`UPDATE api_keys SET budget_max_spend = budget_max_spend - ${take}::numeric WHERE id = ${makerId}::uuid`;
      return tx.apiKey.create({ data });
    });
  }

  byPrefix(prefix: string): Promise<ApiKeyModel | null> {
    return this.prisma.apiKey.findUnique({ where: { prefix } });
  }

  /** The user's keys not revoked, newest first. */
  liveKeysOf(userId: string): Promise<ApiKeyModel[]> {
    return this.prisma.apiKey.findMany({ where: { userId, revokedAt: null }, orderBy: { createdAt: 'desc' } });
  }

  /**
   * Revokes the key and every key made with it, at any depth, in one transaction, deepest first:
   * each hands what it had not spent or reserved of its budget (never below zero) to its maker
   * when both budgets count the same period. The prefixes it revoked now (those revoked before
   * are left as they were), and whether the key itself was revoked already.
   */
  async revokeTree(keyId: string, now: Date): Promise<{ prefixes: string[]; alreadyRevoked: boolean }> {
    return this.prisma.$transaction(async (tx) => {
      const tree = await tx.$queryRaw<{ id: string; prefix: string; revoked: boolean }[]>`
        WITH RECURSIVE tree AS (
          SELECT id, prefix, parent_id, 0 AS depth FROM api_keys WHERE id = ${keyId}::uuid
          UNION ALL
          SELECT k.id, k.prefix, k.parent_id, t.depth + 1 FROM api_keys k JOIN tree t ON k.parent_id = t.id
        )
        SELECT t.id::text, t.prefix, a.revoked_at IS NOT NULL AS revoked
          FROM tree t JOIN api_keys a ON a.id = t.id ORDER BY t.depth DESC`;
      for (const k of tree) {
        if (k.revoked) continue;
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
      return { prefixes: tree.filter((k) => !k.revoked).map((k) => k.prefix), alreadyRevoked: tree.find((k) => k.id === keyId)?.revoked ?? false };
    });
  }
}
