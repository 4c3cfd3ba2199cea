export { IdempotencyModule } from './idempotency.module';
export { IdempotencyStore, type Claim } from './idempotency-store.service';
export { IDEMPOTENCY_HEADER, IDEMPOTENT, IDEMPOTENT_AFTER_BODY, IdempotentRequests, REPLAYED_HEADER } from './idempotent-requests';
export { canonicalJson, requestHash } from './canonical-json';
