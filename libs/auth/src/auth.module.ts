import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ApiKeyAuthenticator } from './api-key-authenticator.service';
import { ApiKeysRepository } from './api-keys.repository';
import { NamespacesRepository } from './namespaces.repository';
import { AuthFailureThrottle } from './auth-failure-throttle.service';
import { AccessGuard } from './auth.guard';
import { ConsoleSessions } from './console-session.service';
import { NamespaceAccess } from './namespace-access.service';

/** Import in the public edge (gateway) only: it installs the global AccessGuard. */
@Module({
  providers: [ApiKeysRepository, NamespacesRepository, ApiKeyAuthenticator, NamespaceAccess, ConsoleSessions, AuthFailureThrottle, { provide: APP_GUARD, useClass: AccessGuard }],
  exports: [NamespacesRepository, ApiKeyAuthenticator, NamespaceAccess, ConsoleSessions, AuthFailureThrottle],
})
export class AuthModule {}
