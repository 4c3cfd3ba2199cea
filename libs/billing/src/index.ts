export { CreditLedger, type CreditBalance, type Reservation, type Settlement } from './credit-ledger.service';
export { BillingModule } from './billing.module';
export { BatchedCreditLedger } from './batched-credit-ledger.service';
