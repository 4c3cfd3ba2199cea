import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';
import type { Caller, NamespaceScope } from './caller';
import { NamespacesRepository } from './namespaces.repository';

/** The most grants kept; past it the oldest go first (each is re-read within a second anyway). */
const MAX_GRANTS = 10_000;

/** Where a grant is kept: found again by the name (resolve) or the id (canAccess) it was asked by. */
const grantKey = (userId: string, by: 'name' | 'id', value: string) => `${userId} ${by} ${value}`;

@Injectable()
export class NamespaceAccess {
  /**
   * Namespaces other than their own that callers were allowed to act on, keyed by user and by
   * the namespace's name and id. A grant is trusted for at most AUTH_CACHE_MS (<= 1 s) after it
   * was read, as a verified API key is: a member who bills every request to their org
   * (target_namespace) otherwise paid a Prisma read on each one, on the chat path before the
   * hand-off (numbers in the issue note), and a membership removed in the database still stops
   * working within a second. Refusals are not kept: a namespace made a moment later is found.
   */
  private readonly granted = new Map<string, { scope: NamespaceScope; until: number }>();

  constructor(
    private readonly namespaces: NamespacesRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * The namespace a request acts on: the caller's own, or `requested` (target_namespace,
   * ?namespace=) if the caller owns it or belongs to its org. Unknown and foreign namespaces
   * get the same 403 so names of other tenants cannot be probed.
   */
  async resolve(caller: Caller, requested?: unknown): Promise<NamespaceScope> {
    if (requested === undefined || requested === null || requested === '' || requested === caller.namespace)
      return { id: caller.namespaceId, name: caller.namespace, type: caller.namespaceType ?? 'user' };
    if (typeof requested !== 'string') throw ApiError.badRequest('target_namespace must be a string');
    const scope = this.grant(caller, 'name', requested) ?? (await this.lookup(caller, { name: requested }));
    if (!scope) throw ApiError.forbidden(`You are not a member of namespace '${requested}'`);
    return scope;
  }

  /** Whether the caller may see resources of this namespace: the same rule as resolve's. */
  async canAccess(caller: Caller, namespaceId: string): Promise<boolean> {
    if (namespaceId === caller.namespaceId || this.grant(caller, 'id', namespaceId)) return true;
    return (await this.lookup(caller, { id: namespaceId })) !== undefined;
  }

  /** The namespace if the caller owns it or belongs to its org (remembered), else undefined. */
  private async lookup(caller: Caller, where: { name: string } | { id: string }): Promise<NamespaceScope | undefined> {
    const ns = await this.namespaces.withMembership(where, caller.userId);
    const allowed = ns && (ns.userId === caller.userId || ns.member);
    return ns && allowed ? this.remember(caller, { id: ns.id, name: ns.name, type: ns.type }) : undefined;
  }

  private grant(caller: Caller, by: 'name' | 'id', value: string): NamespaceScope | undefined {
    const key = grantKey(caller.userId, by, value);
    const hit = this.granted.get(key);
    if (!hit) return undefined;
    if (hit.until > performance.now()) return hit.scope;
    this.granted.delete(key);
    return undefined;
  }

  private remember(caller: Caller, scope: NamespaceScope): NamespaceScope {
    if (this.config.AUTH_CACHE_MS === 0) return scope;
    const entry = { scope, until: performance.now() + this.config.AUTH_CACHE_MS };
    for (const key of [grantKey(caller.userId, 'name', scope.name), grantKey(caller.userId, 'id', scope.id)]) {
      // Re-inserted, so the map's order stays oldest first for the trim below.
      this.granted.delete(key);
      this.granted.set(key, entry);
    }
    for (const key of this.granted.keys()) {
      if (this.granted.size <= MAX_GRANTS) break;
      this.granted.delete(key);
    }
    return scope;
  }
}
