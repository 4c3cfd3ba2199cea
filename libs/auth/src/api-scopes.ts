import { SetMetadata } from '@nestjs/common';

import { API_SCOPES, type ApiScope } from '@atelier/contracts';

export { API_SCOPES, type ApiScope };

export const SCOPE_METADATA = 'atelier:api-scope';
/** Key management: only a key without scope limits may make, list or revoke keys. */
export const FULL_ACCESS = 'full-access';

/** The scope a route (or a whole controller) needs; AccessGuard refuses other scoped keys with 403. */
export const RequiresScope = (scope: ApiScope) => SetMetadata(SCOPE_METADATA, scope);

/** A route only keys without scope limits may use (a limited key must not mint an unlimited one). */
export const RequiresFullAccess = () => SetMetadata(SCOPE_METADATA, FULL_ACCESS);

/**
 * Which per-minute budget a request spends: `work` (rpm) for requests that create work or charge,
 * `read` (read_rpm) for everything else, the default, so a poll never spends what caps work;
 * `none` for key management, which must stay possible on a key that has spent its minute.
 */
export type RateClass = 'work' | 'read' | 'none';
export const RATE_CLASS_METADATA = 'atelier:rate-class';

/** The route creates work or charges: it spends `rpm` (chat, images, videos, enqueue, fine-tune create and tokenize). */
export const CountsAsWork = () => SetMetadata(RATE_CLASS_METADATA, 'work' satisfies RateClass);
/** The route spends no per-minute budget (key management). */
export const NotRateLimited = () => SetMetadata(RATE_CLASS_METADATA, 'none' satisfies RateClass);
