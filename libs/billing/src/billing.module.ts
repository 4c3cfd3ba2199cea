import { Module } from '@nestjs/common';
import { BatchedCreditLedger } from './batched-credit-ledger.service';
import { CreditLedger } from './credit-ledger.service';

@Module({ providers: [CreditLedger, BatchedCreditLedger], exports: [CreditLedger, BatchedCreditLedger] })
export class BillingModule {}
