import { Module } from '@nestjs/common';
import { BatchedCreditLedger } from './batched-credit-ledger.service';
import { CreditLedger } from './credit-ledger.service';
import { PaidRequests } from './paid-requests.service';

@Module({ providers: [CreditLedger, BatchedCreditLedger, PaidRequests], exports: [CreditLedger, BatchedCreditLedger, PaidRequests] })
export class BillingModule {}
