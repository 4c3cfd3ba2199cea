import { Body, Controller, Delete, Get, HttpCode, Inject, Post, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiKeyAuthenticator, AuthFailureThrottle, ConsoleSessions, fromOwnOrigin, PublicRoute, SESSION_COOKIE, sessionIdOf, type Caller, type ConsoleSession } from '@atelier/auth';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError, ConsoleSignInRequest } from '@atelier/contracts';
import { parseBody } from '@atelier/runtime';

/**
 * The console's sign-in: POST /api/console/session trades an API key (and/or the admin token) for
 * an HttpOnly session cookie; GET says who the session is; DELETE ends it. The session then
 * authenticates every public API route as the key would (AccessGuard).
 */
@Controller('api/console/session')
@PublicRoute()
export class ConsoleSessionController {
  constructor(
    private readonly sessions: ConsoleSessions,
    private readonly authenticator: ApiKeyAuthenticator,
    private readonly failures: AuthFailureThrottle,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Post()
  @HttpCode(201)
  async signIn(@Req() req: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply, @Body() body: unknown) {
    // A foreign page must not sign a visitor in to an account of its choosing (login CSRF).
    this.refuseForeignOrigin(req);
    const request = parseBody(ConsoleSignInRequest, body);
    // A wrong admin token or key counts against the address like any failed authentication.
    const { contents, caller } = await this.failures.guard(req.ip, (n, v) => void reply.header(n, v), () => 'console sign-in', async () => {
      const contents = this.sessions.describe(request.api_key, request.admin_token);
      // The key is checked now: a revoked or unknown key opens no session.
      return { contents, caller: contents.key ? await this.authenticator.verify(contents.key.prefix, contents.key.hash) : undefined };
    });
    const id = await this.sessions.create(contents);
    reply.header('set-cookie', this.cookie(req, id, Math.floor(this.sessions.maxAgeMs / 1000)));
    return this.view({ ...contents, createdAt: Date.now() }, caller);
  }

  @Get()
  async current(@Req() req: FastifyRequest) {
    const id = sessionIdOf(req.headers.cookie);
    if (!id) throw ApiError.unauthorized('Not signed in to the console');
    const session = await this.sessions.read(id);
    return this.view(session, session.key ? await this.authenticator.verify(session.key.prefix, session.key.hash) : undefined);
  }

  @Delete()
  @HttpCode(204)
  async signOut(@Req() req: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply): Promise<void> {
    this.refuseForeignOrigin(req);
    const id = sessionIdOf(req.headers.cookie);
    if (id) await this.sessions.end(id);
    reply.header('set-cookie', this.cookie(req, '', 0));
  }

  private refuseForeignOrigin(req: FastifyRequest): void {
    if (req.headers.origin !== undefined && !fromOwnOrigin(req.headers, this.config.PUBLIC_URL))
      throw ApiError.forbidden('Cross-origin request refused: sign in from the console itself');
  }

  /** HttpOnly (no script reads it), SameSite=Lax, Secure whenever the console is served over https. */
  private cookie(req: FastifyRequest, value: string, maxAgeSeconds: number): string {
    const https = req.protocol === 'https' || this.config.PUBLIC_URL?.startsWith('https:') === true;
    return `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}${https ? '; Secure' : ''}`;
  }

  private view(session: ConsoleSession, caller: Caller | undefined) {
    return {
      username: caller?.username ?? null,
      namespace: caller?.namespace ?? null,
      key_prefix: caller?.keyPrefix ?? null,
      // Empty: a key without scopes, which may do everything, key management included.
      scopes: caller ? (caller.scopes ?? []) : [],
      operator: this.sessions.isOperator(session),
      expires_at: Math.floor((session.createdAt + this.sessions.maxAgeMs) / 1000),
    };
  }
}
