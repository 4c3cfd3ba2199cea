import { Injectable } from '@nestjs/common';
import { ApiError } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import type { Caller, NamespaceScope } from './caller';

@Injectable()
export class NamespaceAccess {
  constructor(private readonly prisma: PrismaService) {}

  /**
   * The namespace a request acts on: the caller's own, or `requested` (target_namespace,
   * ?namespace=) if the caller owns it or belongs to its org. Unknown and foreign namespaces
   * get the same 403 so names of other tenants cannot be probed.
   */
  async resolve(caller: Caller, requested?: unknown): Promise<NamespaceScope> {
    if (requested === undefined || requested === null || requested === '' || requested === caller.namespace)
      return { id: caller.namespaceId, name: caller.namespace, type: caller.namespaceType ?? 'user' };
    if (typeof requested !== 'string') throw ApiError.badRequest('target_namespace must be a string');
    const ns = await this.prisma.namespace.findUnique({
      where: { name: requested },
      select: { id: true, name: true, type: true, userId: true, org: { select: { memberships: { where: { userId: caller.userId }, select: { userId: true } } } } },
    });
    const allowed = ns && (ns.userId === caller.userId || (ns.org?.memberships.length ?? 0) > 0);
    if (!ns || !allowed) throw ApiError.forbidden(`You are not a member of namespace '${requested}'`);
    return { id: ns.id, name: ns.name, type: ns.type };
  }

  /** Whether the caller may see resources of this namespace (own, or an org they belong to). */
  async canAccess(caller: Caller, namespaceId: string): Promise<boolean> {
    if (namespaceId === caller.namespaceId) return true;
    const membership = await this.prisma.membership.findFirst({
      where: { userId: caller.userId, org: { namespace: { id: namespaceId } } },
      select: { orgId: true },
    });
    return membership !== null;
  }
}
