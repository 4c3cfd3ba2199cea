import { randomUUID } from 'node:crypto';
import { ApiError } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { createTestEnvironment, createUserNamespace, waitFor, type TestEnvironment } from '@atelier/testing';
import type { Caller } from './caller';
import { NamespaceAccess } from './namespace-access.service';
import { NamespacesRepository } from './namespaces.repository';

/** Which namespaces a caller may act on: its own, and its orgs'; never another tenant's. Real Postgres. */
describe('NamespaceAccess', () => {
  let env: TestEnvironment;
  let prisma: PrismaService;
  let access: NamespaceAccess;

  async function user(): Promise<Caller> {
    const { userId, namespaceId, name } = await createUserNamespace(prisma);
    return { userId, username: name, namespaceId, namespace: name, keyPrefix: name };
  }
  async function org(...members: Caller[]) {
    const name = `o-${randomUUID().slice(0, 8)}`;
    const o = await prisma.organization.create({ data: { name, memberships: { create: members.map((m) => ({ userId: m.userId })) } } });
    const ns = await prisma.namespace.create({ data: { name, type: 'org', orgId: o.id } });
    return { orgId: o.id, namespaceId: ns.id, name };
  }
  const refusal = (p: Promise<unknown>) => p.then(() => undefined, (err: ApiError) => ({ status: err.status, message: err.message }));

  beforeAll(async () => {
    env = await createTestEnvironment({ LOG_LEVEL: 'silent', AUTH_CACHE_MS: '200' });
    prisma = new PrismaService(env.config);
    access = new NamespaceAccess(new NamespacesRepository(prisma), env.config);
  });
  afterAll(async () => {
    await prisma?.$disconnect();
    await env?.cleanup();
  });

  it("resolves the caller's own namespace without asking, and an org's for its members", async () => {
    const alice = await user();
    const team = await org(alice);
    expect(await access.resolve(alice)).toEqual({ id: alice.namespaceId, name: alice.namespace, type: 'user' });
    expect(await access.resolve(alice, team.name)).toEqual({ id: team.namespaceId, name: team.name, type: 'org' });
    expect(await access.canAccess(alice, team.namespaceId)).toBe(true);
  });

  it("refuses another tenant's namespace exactly as one that does not exist, by name and by id", async () => {
    const [alice, bob] = [await user(), await user()];
    const bobs = await org(bob);
    const foreign = await refusal(access.resolve(alice, bob.namespace));
    const orgForeign = await refusal(access.resolve(alice, bobs.name));
    const unknown = await refusal(access.resolve(alice, 'no-such-namespace'));
    expect(foreign?.status).toBe(403);
    expect([foreign?.message, orgForeign?.message, unknown?.message].map((m) => m?.replace(/'[^']*'/, "'?'"))).toEqual(Array(3).fill(unknown?.message.replace(/'[^']*'/, "'?'")));
    expect(await access.canAccess(alice, bob.namespaceId)).toBe(false);
    expect(await access.canAccess(alice, bobs.namespaceId)).toBe(false);
    expect(await access.canAccess(alice, randomUUID())).toBe(false);
    expect((await refusal(access.resolve(alice, 42)))?.status).toBe(400);
  });

  it('stops granting an org within AUTH_CACHE_MS once the membership is removed', async () => {
    const carol = await user();
    const team = await org(carol);
    expect((await access.resolve(carol, team.name)).id).toBe(team.namespaceId);
    await prisma.membership.delete({ where: { orgId_userId: { orgId: team.orgId, userId: carol.userId } } });
    await waitFor(async () => (await refusal(access.resolve(carol, team.name)))?.status === 403, { timeoutMs: 3000, description: 'the removed membership to stop granting' });
    expect(await access.canAccess(carol, team.namespaceId)).toBe(false);
  });
});
