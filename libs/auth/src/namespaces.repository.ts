import { Injectable } from '@nestjs/common';
import { PrismaService } from '@atelier/db';

/** The namespaces table, as access checks, the queue's weights and names of namespaces by id read it. */
@Injectable()
export class NamespacesRepository {
  constructor(private readonly prisma: PrismaService) {}

  /** A namespace by name or id, with whether `userId` is a member of its org. */
  async withMembership(where: { name: string } | { id: string }, userId: string): Promise<{ id: string; name: string; type: 'user' | 'org'; userId: string | null; member: boolean } | undefined> {
    const ns = await this.prisma.namespace.findUnique({
      where,
      select: { id: true, name: true, type: true, userId: true, org: { select: { memberships: { where: { userId }, select: { userId: true } } } } },
    });
    return ns ? { id: ns.id, name: ns.name, type: ns.type, userId: ns.userId, member: (ns.org?.memberships.length ?? 0) > 0 } : undefined;
  }

  async name(id: string): Promise<string | undefined> {
    return (await this.prisma.namespace.findUnique({ where: { id }, select: { name: true } }))?.name;
  }

  /** The namespaces whose queue weight is set, with it. */
  async queueWeights(): Promise<{ id: string; queueWeight: number }[]> {
    const rows = await this.prisma.namespace.findMany({ where: { queueWeight: { not: null } }, select: { id: true, queueWeight: true } });
    return rows.map((r) => ({ id: r.id, queueWeight: r.queueWeight! }));
  }
}
