import { Injectable, Logger, Optional } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiKeyAuthenticator, keyCredentials } from '@atelier/auth';
import { ApiError } from '@atelier/contracts';
import { Metrics, timedStage } from '@atelier/observability';
import { ANSWER_AFTER_ACCESS, toErrorResponse, type AnswerAfterAccess, type HttpHooks } from '@atelier/runtime';
import { requestHash } from './canonical-json';
import { IdempotencyStore } from './idempotency-store.service';

/** Route option (`@RouteConfig(IDEMPOTENT)`) of the POSTs that accept an Idempotency-Key. */
export const IDEMPOTENT = { idempotent: true } as const;
/**
 * Route option of a POST whose body the handler reads itself (a multipart form): the key is
 * claimed by the handler, with a digest of what it read (IdempotentRequests.claimAfterBody).
 */
export const IDEMPOTENT_AFTER_BODY = { idempotent: 'after-body' } as const;

export const IDEMPOTENCY_HEADER = 'idempotency-key';
export const REPLAYED_HEADER = 'idempotent-replayed';
/** 1-255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header leaves the syntax to the server). */
const KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

const CLAIMED = Symbol('atelier.idempotencyClaim');

interface ClaimedRequest {
  userId: string;
  key: string;
  lease: Date;
  settled: boolean;
}
/** ANSWER_AFTER_ACCESS: a replay or a refusal of the key, given once the access guard has passed the request. */
type WithClaim = FastifyRequest & { [CLAIMED]?: ClaimedRequest; [ANSWER_AFTER_ACCESS]?: AnswerAfterAccess };

/**
 * Idempotency-Key on the routes marked IDEMPOTENT (Stripe's semantics): the first request with a
 * key runs and its final answer is stored; a later one with the same key, route and body gets
 * that answer again, byte for byte, with `Idempotent-Replayed: true`, and runs nothing. The same
 * key with another body or route is 422, and while the first is still running 409. 5xx and 429
 * answers are not stored, so a retry runs again. Without the header nothing changes.
 *
 * Two Fastify hooks: preHandler (after the body is parsed) claims the key or answers in its
 * place; onSend stores the answer before it goes out, so a crash can never leave a delivered
 * answer unstored. Fastify runs onSend for every answer, errors included, also when the client
 * has gone away meanwhile.
 */
@Injectable()
export class IdempotentRequests implements HttpHooks {
  private readonly logger = new Logger(IdempotentRequests.name);

  constructor(
    private readonly store: IdempotencyStore,
    private readonly authenticator: ApiKeyAuthenticator,
    @Optional() private readonly metrics?: Metrics,
  ) {}

  install(fastify: FastifyInstance): void {
    // Callback hooks: every request passes both, and most carry no key, for which an async hook
    // would still cost a promise and Fastify's promise handling each time.
    fastify.addHook('preHandler', (req: WithClaim, reply, done) => {
      if (req.headers[IDEMPOTENCY_HEADER] === undefined) return done();
      this.beforeHandler(req, reply).then(() => done(), done);
    });
    fastify.addHook('onSend', (req: WithClaim, reply, payload, done) => {
      const claim = req[CLAIMED];
      if (!claim || claim.settled) return done(null, payload);
      claim.settled = true;
      this.settle(claim, reply, payload).then(() => done(null, payload), done);
    });
  }

  /**
   * For an IDEMPOTENT_AFTER_BODY route, called by its handler (after the access guard) once it has
   * read the body, with a digest of it: true when the request is to run (its answer will be
   * stored), false when this answered it (a replay, or a refusal of the key).
   */
  async claimAfterBody(req: FastifyRequest, reply: FastifyReply, userId: string, digest: string): Promise<boolean> {
    const raw = req.headers[IDEMPOTENCY_HEADER];
    if (raw === undefined) return true;
    const key = Array.isArray(raw) ? undefined : raw;
    if (key === undefined || !KEY_PATTERN.test(key)) {
      await this.refuse(reply, ApiError.badRequest('Idempotency-Key must be 1 to 255 printable ASCII characters, sent once'));
      return false;
    }
    const decided = await this.claim(req as WithClaim, userId, key, digest);
    if (!decided) return true;
    await decided(reply);
    return false;
  }

  private async beforeHandler(req: WithClaim, reply: FastifyReply): Promise<void> {
    const raw = req.headers[IDEMPOTENCY_HEADER];
    if (raw === undefined || (req.routeOptions.config as { idempotent?: boolean } | undefined)?.idempotent !== true) return;
    const key = Array.isArray(raw) ? undefined : raw;
    if (key === undefined || !KEY_PATTERN.test(key))
      return this.refuse(reply, ApiError.badRequest('Idempotency-Key must be 1 to 255 printable ASCII characters, sent once'));
    if ((req.body as { stream?: unknown } | null | undefined)?.stream === true)
      return this.refuse(
        reply,
        ApiError.badRequest('Idempotency-Key cannot be used with stream: true: a streamed answer cannot be replayed. Send the request without stream, or without the key'),
      );
    let userId: string;
    try {
      userId = (await this.authenticator.authenticate(keyCredentials(req.headers), req.raw.socket)).userId;
    } catch {
      // Not authenticated: the access guard gives the request its 401, nothing is claimed.
      return;
    }
    // Answered after the access guard (AccessGuard), never in its place: a replay still needs
    // the key's scope and spends its rate limit, as the first request did.
    req[ANSWER_AFTER_ACCESS] = await this.claim(req, userId, key, requestHash(req.body));
  }

  /** Claims the key for this request (undefined: run it, its answer will be stored), or the answer to give instead. */
  private async claim(req: WithClaim, userId: string, key: string, hash: string): Promise<AnswerAfterAccess | undefined> {
    const claim = await timedStage(this.metrics, 'idempotency.claim', () => this.store.claim(userId, key, `${req.method} ${req.url}`, hash));
    switch (claim.kind) {
      case 'run':
        req[CLAIMED] = { userId, key, lease: claim.lease, settled: false };
        return undefined;
      case 'replay':
        return async (r) => {
          r.code(claim.status).header(REPLAYED_HEADER, 'true');
          if (claim.contentType) r.header('content-type', claim.contentType);
          await r.send(claim.body);
        };
      case 'reused':
        return (r) =>
          this.refuse(r, new ApiError('idempotency_key_reused', 'This Idempotency-Key was already used with a different request body or route; use a new key for a new request'));
      case 'in_use':
        return (r) => this.refuse(r, new ApiError('idempotency_key_in_use', 'A request with this Idempotency-Key is still running; retry once it has finished to get its answer'));
    }
  }

  private async refuse(reply: FastifyReply, error: ApiError): Promise<void> {
    const { status, body } = toErrorResponse(error);
    await reply.code(status).header('content-type', 'application/json; charset=utf-8').send(body);
  }

  private async settle(claim: ClaimedRequest, reply: FastifyReply, payload: unknown): Promise<void> {
    const status = reply.statusCode;
    const body = typeof payload === 'string' ? Buffer.from(payload) : Buffer.isBuffer(payload) ? payload : undefined;
    try {
      if (status >= 500 || status === 429 || body === undefined) await this.store.release(claim.userId, claim.key, claim.lease);
      else await timedStage(this.metrics, 'idempotency.store', () => this.store.store(claim.userId, claim.key, claim.lease, status, headerText(reply.getHeader('content-type')), body));
    } catch (err) {
      // The answer still goes out. The key stays claimed until its lease ends (retries get
      // 409), the safe side: running the request again could charge it twice.
      this.logger.warn(`Could not record the answer for Idempotency-Key of user ${claim.userId}: ${(err as Error).message}`);
    }
  }
}

function headerText(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.join(', ');
  return value === undefined ? null : String(value);
}
