import { Module } from '@nestjs/common';
import { BatchedCreditLedger } from './batched-credit-ledger.service';
import { CreditLedger } from './credit-ledger.service';
import { PaidRequests } from './paid-requests.service';
import { UsageReports } from './usage-report.service';
import { UsageRepository } from './usage.repository';

@Module({ providers: [CreditLedger, BatchedCreditLedger, PaidRequests, UsageReports, UsageRepository], exports: [CreditLedger, BatchedCreditLedger, PaidRequests, UsageReports] })
export class BillingModule {}
