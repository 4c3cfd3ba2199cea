import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import type { Pool } from 'pg';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { createPgPool } from '@atelier/db';
import { backingServiceFault } from '@atelier/runtime';

export interface ChatUsageRecord {
  id: string;
  namespaceId: string;
  userId: string;
  model: string;
  provider: string | null;
  stream: boolean;
  status: 'succeeded' | 'failed' | 'cancelled';
  promptTokens: number;
  completionTokens: number;
  cost: string;
  reservationId: string | null;
  requestId: string | null;
  errorMessage: string | null;
  durationMs: number;
}

const MAX_BATCH = 500;
const FLUSH_DELAY_MS = 50;
/** While Postgres is away rows are held, up to this many and this long (memory stays bounded). */
const MAX_HELD = 100_000;
const OUTAGE_HOLD_MS = 5 * 60_000;
const OUTAGE_RETRY_MS = 500;

// Raw and column-wise (unnest): one statement whatever the row count, planned once per connection.
const INSERT_STATEMENT = {
  name: 'atelier_chat_usage_v1',
  text: `
    INSERT INTO chat_usage (id, namespace_id, user_id, model, provider, stream, status, prompt_tokens, completion_tokens,
                            cost, reservation_id, request_id, error_message, duration_ms)
    SELECT * FROM unnest($1::text[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::boolean[], $7::"ChatUsageStatus"[],
                         $8::int[], $9::int[], $10::numeric[], $11::uuid[], $12::text[], $13::text[], $14::int[])
    ON CONFLICT (id) DO NOTHING`,
};

/**
 * Writes one chat_usage row per request, off the response path. Rows are collected for 50 ms
 * (and while a write is in flight) and written together in one multi-row INSERT, so the table
 * costs a few statements per second rather than one per request at high rates. The charge itself
 * is already durable in the credit ledger; this is the per-request detail.
 */
@Injectable()
export class ChatUsageRecorder implements OnModuleDestroy {
  private readonly logger = new Logger(ChatUsageRecorder.name);
  private pending: ChatUsageRecord[] = [];
  private flushing: Promise<void> | undefined;
  private outageSince?: number;
  private closing = false;
  /** Rows still to write one by one, after Postgres refused the batch they were in. */
  private alone = 0;
  /**
   * Its own single connection (flushes run one at a time): through Prisma, turning a batch's
   * parameters into a query cost the gateway more CPU than the rest of a request's bookkeeping.
   */
  private pool?: Pool;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  record(row: ChatUsageRecord): void {
    // An upstream's error text is the one field no caller's input check has seen, and Postgres
    // stores no NUL in text: kept as U+FFFD, the row is written with the rest.
    this.pending.push(row.errorMessage?.includes('\0') ? { ...row, errorMessage: row.errorMessage.replace(/\0/g, '\uFFFD') } : row);
    // Collecting for a moment turns a burst of requests into one INSERT (and one commit).
    this.flushing ??= new Promise((resolve) => setTimeout(resolve, FLUSH_DELAY_MS)).then(() => this.flush());
  }

  /** Resolves once every row recorded so far is written (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, this.alone > 0 ? 1 : MAX_BATCH);
      try {
        this.pool ??= createPgPool(this.config.DATABASE_URL, 1, 'atelier-chat-usage');
        await this.pool.query({
          ...INSERT_STATEMENT,
          values: [
            batch.map((r) => r.id), batch.map((r) => r.namespaceId), batch.map((r) => r.userId), batch.map((r) => r.model),
            batch.map((r) => r.provider), batch.map((r) => r.stream), batch.map((r) => r.status), batch.map((r) => r.promptTokens),
            batch.map((r) => r.completionTokens), batch.map((r) => r.cost), batch.map((r) => r.reservationId),
            batch.map((r) => r.requestId), batch.map((r) => r.errorMessage), batch.map((r) => r.durationMs),
          ],
        });
        this.outageSince = undefined;
        if (this.alone > 0) this.alone--;
      } catch (err) {
        const outage = backingServiceFault(err);
        const waited = Date.now() - (this.outageSince ??= Date.now());
        if (outage && !this.closing && waited < OUTAGE_HOLD_MS && this.pending.length + batch.length <= MAX_HELD) {
          // Held and written once Postgres is back: the usage rows are how spend is reported.
          if (waited === 0) this.logger.warn(`${outage} unavailable; holding chat usage rows until it is back`);
          this.pending.unshift(...batch);
          await new Promise((resolve) => setTimeout(resolve, OUTAGE_RETRY_MS));
          continue;
        }
        if (!outage && batch.length > 1) {
          // One INSERT writes the whole batch or nothing: a row Postgres refuses must not cost the
          // requests written with it, so they go again one at a time and only that row is lost.
          // Not GroupCommit's rule, which retries every failed batch call by call: an outage
          // would then cost one connection attempt per row instead of one wait for the batch.
          this.pending.unshift(...batch);
          this.alone = batch.length;
          continue;
        }
        if (this.alone > 0) this.alone--;
        this.logger.error(`Could not record usage of ${batch.length} chat request(s) (${batch.map((r) => r.id).join(', ')}): ${(err as Error).message}`);
      }
    }
    this.flushing = undefined;
  }

  /** Runs before the (global) database module closes its pool. */
  async onModuleDestroy(): Promise<void> {
    // A stopping process cannot wait out an outage; what cannot be written now is logged.
    this.closing = true;
    await this.drain();
    await this.pool?.end();
  }
}
