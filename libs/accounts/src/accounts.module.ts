import { Module } from '@nestjs/common';
import { BillingModule } from '@atelier/billing';
import { AccountsService } from './accounts.service';
import { LimitChanges, NamespaceAccess, NamespacesRepository } from '@atelier/auth';
import { ApiKeys } from './api-keys.service';
import { QueueWeights } from './queue-weights.service';
import { AccountKeysRepository } from './account-keys.repository';
import { AccountsRepository } from './accounts.repository';

@Module({ imports: [BillingModule], providers: [AccountsService, ApiKeys, AccountsRepository, AccountKeysRepository, NamespaceAccess, NamespacesRepository, LimitChanges, QueueWeights], exports: [AccountsService, ApiKeys, QueueWeights] })
export class AccountsModule {}
