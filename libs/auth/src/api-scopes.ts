import { SetMetadata } from '@nestjs/common';

/** What a self-service key may be limited to; a key without scopes may use everything. */
export const API_SCOPES = ['chat', 'images', 'videos', 'queue', 'events', 'models', 'repos', 'fine_tunes'] as const;
export type ApiScope = (typeof API_SCOPES)[number];

export const SCOPE_METADATA = 'atelier:api-scope';
/** Key management: only a key without scope limits may make, list or revoke keys. */
export const FULL_ACCESS = 'full-access';

/** The scope a route (or a whole controller) needs; AccessGuard refuses other scoped keys with 403. */
export const RequiresScope = (scope: ApiScope) => SetMetadata(SCOPE_METADATA, scope);

/** A route only keys without scope limits may use (a limited key must not mint an unlimited one). */
export const RequiresFullAccess = () => SetMetadata(SCOPE_METADATA, FULL_ACCESS);
