import { randomUUID } from 'node:crypto';
import { Module } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Caller } from '@atelier/auth';
import type { ApiError } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { createService, ServiceRuntimeModule } from '@atelier/runtime';
import { createTestEnvironment, type TestEnvironment } from '@atelier/testing';
import { AccountsModule } from './accounts.module';
import { AccountsService } from './accounts.service';
import { ApiKeys } from './api-keys.service';

/** Keys made with keys: a budget carved from the maker's, against a real Postgres. */
describe('ApiKeys', () => {
  let env: TestEnvironment;
  let app: NestFastifyApplication;
  let keys: ApiKeys;
  let accounts: AccountsService;
  let prisma: PrismaService;
  const refusal = (p: Promise<unknown>) => p.then(() => undefined, (err: ApiError) => ({ status: err.status, message: err.message }));

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
    @Module({ imports: [AccountsModule] })
    class KeysTestModule {}
    app = await createService({ module: KeysTestModule, imports: [ServiceRuntimeModule.forRoot({ service: 'api-keys-test', config: env.config })] }, env.config, { service: 'api-keys-test' });
    keys = app.get(ApiKeys);
    accounts = app.get(AccountsService);
    prisma = app.get(PrismaService);
  });
  afterAll(async () => {
    await app?.close();
    await env?.cleanup();
  });

  /** A user's key with a monthly budget of 1, as the authenticator would present it. */
  async function makerWithBudget(): Promise<Caller> {
    const username = `u-${randomUUID().slice(0, 8)}`;
    await accounts.createUser(username, '100');
    const made = await keys.createForUser(username, { name: 'maker', budget: { max_spend: '1', period: 'month' } });
    const row = await prisma.apiKey.findUniqueOrThrow({ where: { prefix: made.prefix }, include: { user: { include: { namespace: true } } } });
    return { userId: row.userId, username, namespaceId: row.namespaceId!, namespace: username, keyPrefix: row.prefix, keyId: row.id, hasBudget: true };
  }
  const budgetOf = async (prefix: string) => (await prisma.apiKey.findUniqueOrThrow({ where: { prefix } })).budgetMaxSpend?.toFixed();

  it('carves each child budget from what the maker has left: of two racing makes, only one fits', async () => {
    const maker = await makerWithBudget();
    const results = await Promise.allSettled([
      keys.create(maker, { name: 'a', budget: { max_spend: '0.6', period: 'month' } }),
      keys.create(maker, { name: 'b', budget: { max_spend: '0.6', period: 'month' } }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    const refused = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')!.reason as ApiError;
    expect(refused.status).toBe(403);
    expect(refused.message).toBe(`budget.max_spend must not exceed 0.4, what the key making it (${maker.keyPrefix}) has left of its budget this month`);
    expect(await budgetOf(maker.keyPrefix)).toBe('0.4');
    // The user's first key (unnamed), the maker, and the one child that fit.
    expect((await keys.list(maker)).data.map((k) => k.name).filter(Boolean).sort()).toEqual([expect.stringMatching(/^[ab]$/), 'maker']);
  });

  it('refuses a child without a budget, or of another period, taking nothing; revoking the child gives its budget back', async () => {
    const maker = await makerWithBudget();
    expect(await refusal(keys.create(maker, { name: 'none' }))).toMatchObject({ status: 403, message: expect.stringContaining('give the new key a budget of its own, at most 1 per month') });
    expect(await refusal(keys.create(maker, { name: 'daily', budget: { max_spend: '0.1', period: 'day' } }))).toMatchObject({ status: 403, message: expect.stringContaining("budget.period must be 'month'") });
    expect(await budgetOf(maker.keyPrefix)).toBe('1');
    const child = await keys.create(maker, { name: 'child', budget: { max_spend: '0.25', period: 'month' } });
    expect(await budgetOf(maker.keyPrefix)).toBe('0.75');
    expect(await keys.revoke(maker, child.prefix)).toMatchObject({ prefix: child.prefix, revoked_keys: [] });
    expect(await budgetOf(maker.keyPrefix)).toBe('1');
  });
});
