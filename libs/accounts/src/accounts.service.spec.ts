import { randomUUID } from 'node:crypto';
import { Module } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { apiKeyPrefix, hashApiKey } from '@atelier/auth';
import { API_KEY_REVOKED_CHANNEL, type ApiError } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { BroadcastBus, createService, ServiceRuntimeModule } from '@atelier/runtime';
import { createTestEnvironment, waitFor, type TestEnvironment } from '@atelier/testing';
import { AccountsModule } from './accounts.module';
import { AccountsService } from './accounts.service';

/** The operator's account operations, against a real Postgres and Redis. */
describe('AccountsService', () => {
  let env: TestEnvironment;
  let app: NestFastifyApplication;
  let accounts: AccountsService;
  let prisma: PrismaService;
  const revoked: string[] = [];
  const name = (p: string) => `${p}-${randomUUID().slice(0, 8)}`;
  const refusal = (p: Promise<unknown>) => p.then(() => undefined, (err: ApiError) => ({ status: err.status, message: err.message }));

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent' });
    @Module({ imports: [AccountsModule] })
    class AccountsTestModule {}
    app = await createService({ module: AccountsTestModule, imports: [ServiceRuntimeModule.forRoot({ service: 'accounts-test', config: env.config })] }, env.config, {
      service: 'accounts-test',
    });
    accounts = app.get(AccountsService);
    prisma = app.get(PrismaService);
    await app.get(BroadcastBus).subscribe(API_KEY_REVOKED_CHANNEL, (event: { prefix: string }) => revoked.push(event.prefix));
  });
  afterAll(async () => {
    await app?.close();
    await env?.cleanup();
  });

  it('makes a user with a namespace of their name, funded, and a first key stored only as a hash', async () => {
    const username = name('u');
    const made = await accounts.createUser(username, '12.5');
    expect(made).toMatchObject({ username, namespace: username });
    expect(await accounts.describeNamespace(username)).toMatchObject({ namespace: username, type: 'user', credits: '12.5', reserved: '0' });
    const keys = await prisma.apiKey.findMany({ where: { user: { username } } });
    expect(keys).toHaveLength(1);
    expect(apiKeyPrefix(made.api_key)).toBe(keys[0].prefix);
    expect(keys[0].hash).toBe(hashApiKey(made.api_key));
    expect(JSON.stringify(keys[0])).not.toContain(made.api_key);
    expect(await refusal(accounts.createUser(username))).toMatchObject({ status: 409 });
  });

  it('refuses an org named like an existing namespace, and unknown members, with nothing written', async () => {
    const alice = name('u');
    await accounts.createUser(alice);
    expect(await refusal(accounts.createOrg(alice, [alice]))).toMatchObject({ status: 409 });
    const org = name('o');
    expect(await refusal(accounts.createOrg(org, [alice, 'nobody-here']))).toMatchObject({ status: 404, message: expect.stringContaining('nobody-here') });
    expect(await prisma.organization.findUnique({ where: { name: org } })).toBeNull();
    expect(await accounts.createOrg(org, [alice, alice], '3')).toEqual({ name: org, namespace: org, members: [alice], credits: '3' });
  });

  it("revokes a key once, broadcasting it to every replica's cache; again is the same answer, an unknown one 404", async () => {
    const username = name('u');
    await accounts.createUser(username);
    const second = await accounts.createApiKey(username);
    const first = await accounts.revokeApiKey(second.prefix);
    expect(first).toMatchObject({ prefix: second.prefix, revoked_keys: [] });
    await waitFor(() => revoked.includes(second.prefix), { description: 'the revocation broadcast' });
    expect((await accounts.revokeApiKey(second.prefix)).revoked_at).toBe(first.revoked_at);
    expect((await prisma.apiKey.findUnique({ where: { prefix: second.prefix } }))?.revokedAt).not.toBeNull();
    expect(await refusal(accounts.revokeApiKey('nosuchprefix'))).toMatchObject({ status: 404 });
  });

  it('adjusts credits exactly, and never below what is reserved', async () => {
    const username = name('u');
    await accounts.createUser(username, '1');
    expect(await accounts.adjustCredits(username, '0.000001')).toEqual({ namespace: username, credits: '1.000001' });
    expect(await accounts.adjustCredits(username, '-1.000001')).toEqual({ namespace: username, credits: '0' });
    expect((await refusal(accounts.adjustCredits(username, '-1')))?.status).toBeGreaterThanOrEqual(400);
  });
});
