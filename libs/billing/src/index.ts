export { CreditLedger, type CreditBalance, type Reservation, type Settlement, type StaleReservationRule } from './credit-ledger.service';
export { BillingModule } from './billing.module';
export { BatchedCreditLedger } from './batched-credit-ledger.service';
export { PaidRequests, PAID_REQUEST_KINDS, reservationReference, syncReservationMaxAgeMs, type PaidRequestKind } from './paid-requests.service';
export { StaleReservationSweeper, StaleReservationsModule } from './stale-reservations.sweeper';
