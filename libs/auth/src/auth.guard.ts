import { createParamDecorator, Inject, Injectable, Optional, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';
import { Metrics, timedStage } from '@atelier/observability';
import { ACCESS_METADATA, ANSWER_AFTER_ACCESS, AnsweredBeforeHandler, RateLimiter, type AnswerAfterAccess, type RouteAccess } from '@atelier/runtime';
import { keyCredentials } from './api-key';
import { ApiKeyAuthenticator } from './api-key-authenticator.service';
import { AuthFailureThrottle } from './auth-failure-throttle.service';
import { FULL_ACCESS, RATE_CLASS_METADATA, SCOPE_METADATA, type RateClass } from './api-scopes';
import { callerRateLimits, takeRateLimits } from './caller-rate-limits';
import { secretsEqual } from './api-key';
import type { Caller } from './caller';
import { ConsoleSessions, sessionIdOf, type ConsoleSession } from './console-session.service';

const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Whether a request comes from the gateway's own origin: its Origin header (every browser sends
 * one on a cross-origin request and on any same-origin fetch that is not GET or HEAD) names this
 * host or PUBLIC_URL's, or, without Origin, the browser says same-origin in Sec-Fetch-Site.
 */
export function fromOwnOrigin(headers: FastifyRequest['headers'], publicUrl: string | undefined): boolean {
  const origin = headers.origin;
  if (typeof origin !== 'string') return headers['sec-fetch-site'] === 'same-origin';
  try {
    const from = new URL(origin);
    // Read with the origin's scheme, so a Host header that spells out the default port still matches.
    const own = headers.host === undefined ? undefined : new URL(`${from.protocol}//${headers.host}`).host;
    return from.host === own || (publicUrl !== undefined && from.host === new URL(publicUrl).host);
  } catch {
    return false;
  }
}


type RequestWithCaller = FastifyRequest & { caller?: Caller; [ANSWER_AFTER_ACCESS]?: AnswerAfterAccess };

/** What a route (its handler, or else its controller) declares: who may call it, and the scope a key needs. */
interface RouteRules {
  access: RouteAccess | undefined;
  scope: string | undefined;
  rateClass: RateClass;
}

/**
 * Global guard: every route needs an API key unless marked otherwise, so a new controller
 * cannot be exposed by forgetting a decorator.
 */
@Injectable()
export class AccessGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly authenticator: ApiKeyAuthenticator,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly sessions: ConsoleSessions,
    private readonly failures: AuthFailureThrottle,
    @Optional() private readonly metrics?: Metrics,
    @Optional() private readonly limiter?: RateLimiter,
  ) {}

  /**
   * Decorators are fixed once the routes exist, so each route's rules are read once. Through the
   * Reflector, every request walked the metadata up the prototype chain four times: 0.6 us in a
   * warm loop against 0.02 us here, and 2 % of the gateway's CPU samples under load, where its
   * caches are cold. Keyed by handler, then controller: a controller's routes may differ (media).
   */
  private readonly rules = new WeakMap<object, WeakMap<object, RouteRules>>();

  private rulesOf(context: ExecutionContext): RouteRules {
    const handler = context.getHandler();
    const controller = context.getClass();
    let byClass = this.rules.get(handler);
    if (!byClass) this.rules.set(handler, (byClass = new WeakMap()));
    let rules = byClass.get(controller);
    if (!rules) {
      const targets = [handler, controller];
      rules = {
        access: this.reflector.getAllAndOverride<RouteAccess | undefined>(ACCESS_METADATA, targets),
        scope: this.reflector.getAllAndOverride<string | undefined>(SCOPE_METADATA, targets),
        rateClass: this.reflector.getAllAndOverride<RateClass | undefined>(RATE_CLASS_METADATA, targets) ?? 'read',
      };
      byClass.set(controller, rules);
    }
    return rules;
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return true;
    const rules = this.rulesOf(context);
    const req = context.switchToHttp().getRequest<RequestWithCaller>();
    if (rules.access === 'public') return true;
    // An address that keeps presenting wrong credentials is refused before any lookup.
    return this.failures.guard(
      req.ip,
      (name, value) => void context.switchToHttp().getResponse<FastifyReply>().header(name, value),
      () => `${req.method} ${req.url.split('?')[0]}`,
      () => this.admit(context, req, rules),
      keyCredentials(req.headers) !== undefined || sessionIdOf(req.headers.cookie) !== undefined,
    );
  }

  private async admit(context: ExecutionContext, req: RequestWithCaller, { access, scope, rateClass }: RouteRules): Promise<boolean> {
    // A console session (cookie) stands in for the key or admin token only when no Authorization
    // header is sent: API clients are never affected by a stray cookie.
    const credentials = keyCredentials(req.headers);
    const sessionId = credentials === undefined ? sessionIdOf(req.headers.cookie) : undefined;
    const session = sessionId === undefined ? undefined : await this.session(req, sessionId);
    if (access === 'admin') {
      const token = this.config.ADMIN_TOKEN;
      // Without a configured token the admin API does not exist.
      if (!token) throw new ApiError('route_not_found', `Cannot ${req.method} ${req.url.split('?')[0]}`);
      if (session) {
        if (!this.sessions.isOperator(session)) throw ApiError.forbidden('Operator routes need a console session opened with the admin token');
        return true;
      }
      const m = /^Bearer\s+(\S+)\s*$/i.exec(String(req.headers.authorization ?? ''));
      if (!m) throw ApiError.unauthorized('Missing admin token; send "Authorization: Bearer <ADMIN_TOKEN>"');
      if (!secretsEqual(m[1], token)) throw ApiError.unauthorized('Invalid admin token');
      return true;
    }
    const end = this.metrics?.stage('auth');
    const caller = session ? await this.sessionCaller(sessionId!, session) : await this.authenticator.authenticate(credentials, req.raw.socket);
    req.caller = caller;
    end?.();
    if (scope && caller.scopes && caller.scopes.length > 0) {
      if (scope === FULL_ACCESS) throw ApiError.forbidden(`This API key is limited to ${caller.scopes.join(', ')}; managing API keys needs a key without scopes`);
      if (!caller.scopes.includes(scope)) throw ApiError.forbidden(`This API key lacks the '${scope}' scope (it has: ${caller.scopes.join(', ')})`);
    }
    // Keys without limits of the request's class cost no Redis call.
    const unit = rateClass === 'work' ? 'requests' : 'reads';
    const limits = rateClass === 'none' ? [] : callerRateLimits(caller, unit);
    if (limits.length > 0) {
      const reply = context.switchToHttp().getResponse<FastifyReply>();
      await timedStage(this.metrics, 'rate_limit.requests', () => takeRateLimits(this.limiter!, limits, unit, (name, value) => void reply.header(name, value)));
    }
    const decided = req[ANSWER_AFTER_ACCESS];
    if (decided) {
      await decided(context.switchToHttp().getResponse<FastifyReply>());
      throw new AnsweredBeforeHandler();
    }
    return true;
  }

  /** The live session, refusing a cookie-authenticated unsafe request from another origin (CSRF). */
  private async session(req: FastifyRequest, sessionId: string): Promise<ConsoleSession> {
    const session = await this.sessions.read(sessionId);
    if (UNSAFE_METHODS.has(req.method) && !fromOwnOrigin(req.headers, this.config.PUBLIC_URL))
      throw ApiError.forbidden('Cross-origin request refused: a console session only authenticates requests from its own origin');
    return session;
  }

  /** The session's key, verified like a presented one; a key that no longer verifies (revoked, expired) ends the session. */
  private async sessionCaller(sessionId: string, session: ConsoleSession): Promise<Caller> {
    if (!session.key) throw ApiError.unauthorized('This console session was opened with the admin token only; sign in with an API key');
    try {
      return await this.authenticator.verify(session.key.prefix, session.key.hash);
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) await this.sessions.end(sessionId);
      throw err;
    }
  }
}

export const CurrentCaller = createParamDecorator((_: unknown, ctx: ExecutionContext): Caller => {
  const caller = ctx.switchToHttp().getRequest<RequestWithCaller>().caller;
  if (!caller) throw ApiError.unauthorized('Authentication is required');
  return caller;
});
