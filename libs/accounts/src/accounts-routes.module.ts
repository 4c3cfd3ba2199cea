import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { BillingModule } from '@atelier/billing';
import { AccountsModule } from './accounts.module';
import { AdminController } from './admin.controller';
import { ApiKeysController } from './api-keys.controller';
import { ConsoleSessionController } from './console-session.controller';
import { MembershipsController } from './memberships.controller';

/**
 * Accounts' HTTP routes on the gateway: the admin API, API keys and org membership. Apart from
 * AccountsModule, which services without an HTTP API of their own import too.
 */
@Module({ imports: [AccountsModule, AuthModule, BillingModule], controllers: [AdminController, ApiKeysController, ConsoleSessionController, MembershipsController] })
export class AccountsRoutesModule {}
