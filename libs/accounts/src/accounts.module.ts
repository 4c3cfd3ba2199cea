import { Module } from '@nestjs/common';
import { BillingModule } from '@atelier/billing';
import { AccountsService } from './accounts.service';

@Module({ imports: [BillingModule], providers: [AccountsService], exports: [AccountsService] })
export class AccountsModule {}
