import { Module } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import { HTTP_HOOKS } from '@atelier/runtime';
import { IdempotencyStore } from './idempotency-store.service';
import { IdempotentRequests } from './idempotent-requests';

/** Import in the public edge (gateway): Idempotency-Key on the routes marked IDEMPOTENT. */
@Module({
  imports: [AuthModule],
  providers: [IdempotencyStore, IdempotentRequests, { provide: HTTP_HOOKS, useExisting: IdempotentRequests }],
  exports: [IdempotencyStore, IdempotentRequests],
})
export class IdempotencyModule {}
