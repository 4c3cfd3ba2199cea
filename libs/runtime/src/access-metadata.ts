import { SetMetadata } from '@nestjs/common';
import type { FastifyReply } from 'fastify';

/** Read by the gateway's global AccessGuard; lives here so health endpoints can opt out. */
export const ACCESS_METADATA = 'atelier:access';
export type RouteAccess = 'public' | 'admin';

/** No credentials needed (health checks). */
export const PublicRoute = () => SetMetadata(ACCESS_METADATA, 'public' satisfies RouteAccess);
/** Operator routes: `Authorization: Bearer $ADMIN_TOKEN`; absent entirely when ADMIN_TOKEN is unset. */
export const AdminRoute = () => SetMetadata(ACCESS_METADATA, 'admin' satisfies RouteAccess);

/**
 * An answer a hook before the handler decided on (an Idempotency-Key replay), set on the request
 * under this symbol. The AccessGuard gives it only after its own checks pass (scopes, rate
 * limits), then throws AnsweredBeforeHandler so the handler never runs.
 */
export const ANSWER_AFTER_ACCESS = Symbol('atelier.answerAfterAccess');
export type AnswerAfterAccess = (reply: FastifyReply) => Promise<void>;

/** The request was answered in the handler's place; the exception filter sees the reply sent and adds nothing. */
export class AnsweredBeforeHandler extends Error {
  constructor() {
    super('answered before the handler');
  }
}
