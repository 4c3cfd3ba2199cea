export { CreditLedger, type ChargeTags, type CreditBalance, type DeliveredUsage, type RequestRecord, type Reservation, type Settlement, type StaleReservationRule } from './credit-ledger.service';
export { BillingModule } from './billing.module';
export { BatchedCreditLedger } from './batched-credit-ledger.service';
export { spentNow as budgetSpentNowSql } from './credit-statements';
export { chargeTags, PaidRequests, PAID_REQUEST_KINDS, reservationReference, syncReservationMaxAgeMs, type PaidRequestKind, type Payer } from './paid-requests.service';
export { StaleReservationSweeper, StaleReservationsModule } from './stale-reservations.sweeper';
export { ADMIN_USAGE_GROUPS, usageCsv, UsageReports, USAGE_GROUPS, type UsageGroup, type UsageQuery, type UsageReport, type UsageRow } from './usage-report.service';
export { BillingRoutesModule } from './billing-routes.module';
export { sendUsage } from './usage.controller';
