import { Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { Prisma, PrismaService } from '@atelier/db';

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

/**
 * Writes one chat_usage row per request, off the response path. Rows that arrive while a write
 * is in flight are collected and written together in the next multi-row INSERT, so the table
 * costs one statement per batch rather than one per request at high rates. The charge itself
 * is already durable in the credit ledger; this is the per-request detail.
 */
@Injectable()
export class ChatUsageRecorder implements OnModuleDestroy {
  private readonly logger = new Logger(ChatUsageRecorder.name);
  private pending: ChatUsageRecord[] = [];
  private flushing: Promise<void> | undefined;

  constructor(private readonly prisma: PrismaService) {}

  record(row: ChatUsageRecord): void {
    this.pending.push(row);
    this.flushing ??= this.flush();
  }

  /** Resolves once every row recorded so far is written (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, MAX_BATCH);
      try {
        await this.prisma.chatUsage.createMany({
          data: batch.map((r) => ({ ...r, cost: new Prisma.Decimal(r.cost) })),
          skipDuplicates: true,
        });
      } catch (err) {
        this.logger.error(`Could not record usage of ${batch.length} chat request(s): ${(err as Error).message}`);
      }
    }
    this.flushing = undefined;
  }

  /** Runs before the (global) database module closes its pool. */
  async onModuleDestroy(): Promise<void> {
    await this.drain();
  }
}
