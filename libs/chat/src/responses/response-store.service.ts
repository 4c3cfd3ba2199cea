import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { errorSummary, runPeriodically } from '@atelier/runtime';
import type { ResponseObject } from './response-output';
import type { ResponseItem } from './responses-request';

const DAY_MS = 24 * 3600 * 1000;
/** Expired answers are deleted in batches this big, so one sweep never holds a long lock. */
const SWEEP_BATCH = 1000;

/** Ids atelier could have made: anything else is unknown without a query (and NUL never reaches Postgres). */
const wellFormed = (id: string) => /^resp_[A-Za-z0-9_-]{1,100}$/.test(id);

export interface StoredConversation {
  response: ResponseObject;
  /** What the model saw: earlier conversation and this request's input. */
  inputItems: ResponseItem[];
}

/**
 * Stored Responses API answers, per namespace, for RESPONSES_TTL_DAYS: what previous_response_id
 * continues and GET /api/ai/responses/{id} reads. An answer past its expiry reads as unknown at
 * once and is deleted by the hourly sweep.
 */
@Injectable()
export class ResponseStore implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(ResponseStore.name);
  private periodic?: { stop(): Promise<void> };

  constructor(
    private readonly prisma: PrismaService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.periodic = runPeriodically(3600_000, () => this.sweep(), (err) => this.logger.warn(`Deleting expired responses failed: ${errorSummary(err)}`));
  }

  async onModuleDestroy(): Promise<void> {
    await this.periodic?.stop();
  }

  /**
   * Stored before the answer goes out, so a client's next turn finds it. Committed without waiting
   * for the WAL flush (synchronous_commit off, for this one statement): the row is visible at once,
   * and a Postgres crash can lose the last fraction of a second of stored responses (their next
   * turn's previous_response_id is then 404), never credits. Waiting for the flush put about 3 ms
   * on every stored response (bench:chat, docs/benchmarks.md).
   */
  async save(namespaceId: string, userId: string, response: ResponseObject, inputItems: ResponseItem[]): Promise<void> {
    const expiresAt = new Date(Date.now() + this.config.RESPONSES_TTL_DAYS * DAY_MS);
    await this.prisma.$executeRaw`
      WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
      INSERT INTO responses (id, namespace_id, user_id, previous_response_id, response, input_items, expires_at)
      SELECT ${response.id}, ${namespaceId}::uuid, ${userId}::uuid, ${(response.previous_response_id as string | null) ?? null},
             ${JSON.stringify(response)}::jsonb, ${JSON.stringify(inputItems)}::jsonb, ${expiresAt} FROM relaxed`;
  }

  /**
   * A live stored answer the caller may read (`readable` says which namespaces), else 404 with
   * OpenAI's text: unknown, expired and foreign ids alike, so other tenants' ids cannot be probed.
   */
  async get(id: string, readable: (namespaceId: string) => Promise<boolean>, param?: string): Promise<StoredConversation> {
    const row = wellFormed(id) ? await this.prisma.storedResponse.findFirst({ where: { id, expiresAt: { gt: new Date() } } }) : null;
    if (!row || !(await readable(row.namespaceId))) {
      const message = param ? `Previous response with id '${id}' not found.` : `Response with id '${id}' not found.`;
      throw new ApiError('resource_not_found', message, param ? { fields: [{ field: param, message }] } : undefined);
    }
    return { response: row.response as unknown as ResponseObject, inputItems: row.inputItems as unknown as ResponseItem[] };
  }

  async delete(id: string, readable: (namespaceId: string) => Promise<boolean>): Promise<void> {
    await this.get(id, readable);
    await this.prisma.storedResponse.deleteMany({ where: { id } });
  }

  private async sweep(): Promise<void> {
    for (;;) {
      const deleted = await this.prisma.$executeRaw`DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE expires_at <= now() LIMIT ${SWEEP_BATCH})`;
      if (deleted < SWEEP_BATCH) return;
    }
  }
}
