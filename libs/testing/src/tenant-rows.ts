import { randomUUID } from 'node:crypto';

/** What this needs of a Prisma client (libs/db's specs use this lib, so it cannot import libs/db). */
interface TenantTables {
  user: { create(args: { data: { username: string } }): PromiseLike<{ id: string }> };
  namespace: { create(args: { data: { name: string; type: 'user'; userId: string } }): PromiseLike<{ id: string }> };
}

/** A user and their own namespace, named alike, written straight to the database: for lib specs that need a tenant without the gateway. */
export async function createUserNamespace(prisma: TenantTables): Promise<{ userId: string; namespaceId: string; name: string }> {
  const name = `u-${randomUUID().slice(0, 8)}`;
  const user = await prisma.user.create({ data: { username: name } });
  const ns = await prisma.namespace.create({ data: { name, type: 'user', userId: user.id } });
  return { userId: user.id, namespaceId: ns.id, name };
}
