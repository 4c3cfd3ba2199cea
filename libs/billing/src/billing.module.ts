import { Module } from '@nestjs/common';
import { CreditLedger } from './credit-ledger.service';

@Module({ providers: [CreditLedger], exports: [CreditLedger] })
export class BillingModule {}
