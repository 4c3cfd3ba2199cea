import { SetMetadata } from '@nestjs/common';

/** Read by the gateway's global AccessGuard; lives here so health endpoints can opt out. */
export const ACCESS_METADATA = 'atelier:access';
export type RouteAccess = 'public' | 'admin';

/** No credentials needed (health checks). */
export const PublicRoute = () => SetMetadata(ACCESS_METADATA, 'public' satisfies RouteAccess);
/** Operator routes: `Authorization: Bearer $ADMIN_TOKEN`; absent entirely when ADMIN_TOKEN is unset. */
export const AdminRoute = () => SetMetadata(ACCESS_METADATA, 'admin' satisfies RouteAccess);
