export { generateApiKey, hashApiKey, apiKeyPrefix, secretsEqual, type GeneratedApiKey } from './api-key';
export type { Caller, MakerLimits, NamespaceScope } from './caller';
export { ApiKeyAuthenticator } from './api-key-authenticator.service';
export { NamespaceAccess } from './namespace-access.service';
export { AccessGuard, CurrentCaller } from './auth.guard';
export { AdminRoute, PublicRoute } from '@atelier/runtime';
export { AuthModule } from './auth.module';
export { API_SCOPES, RequiresFullAccess, RequiresScope, type ApiScope } from './api-scopes';
export { callerRateLimits, takeRateLimits, type NamedRateLimit, type RateUnit } from './caller-rate-limits';
