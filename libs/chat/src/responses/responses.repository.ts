import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';
import { Prisma, PrismaService } from '@atelier/db';
import { ClusterSweeps, errorSummary } from '@atelier/runtime';
import type { ResponseObject } from './response-output';
import type { ResponseItem } from './responses-request';

const DAY_MS = 24 * 3600 * 1000;
/** Expired answers are deleted in batches this big, so one sweep never holds a long lock. */
const SWEEP_BATCH = 1000;

/** Ids atelier could have made: anything else is unknown without a query (and NUL never reaches Postgres). */
const wellFormed = (id: string) => /^resp_[A-Za-z0-9_-]{1,100}$/.test(id);

/**
 * The items a chain's head saw, oldest first: each turn's input after the turn before it and its
 * answer. A row from before turns were stored once already holds everything before it.
 */
function conversation(rows: readonly ChainRow[]): ResponseItem[] {
  const items: ResponseItem[] = [];
  rows.forEach((row, i) => {
    if (i > 0) items.push(...((rows[i - 1].response.output as ResponseItem[] | undefined) ?? []));
    items.push(...row.input_items);
  });
  return items;
}

export interface StoredConversation {
  response: ResponseObject;
  /** What the model saw: earlier conversation and this request's input. */
  inputItems: ResponseItem[];
  /** Bytes the chain up to and including this response holds. */
  chainBytes: number;
}

interface ChainRow {
  id: string;
  response: ResponseObject;
  input_items: ResponseItem[];
  items_delta: boolean;
  chain_bytes: bigint;
}

/** Deleting expired leaves repeats at most this often per sweep (a chain loses its tail a link per round). */
const SWEEP_ROUNDS = 10_000;

/**
 * Stored Responses API answers, per namespace, for RESPONSES_TTL_DAYS: what previous_response_id
 * continues and GET /api/ai/responses/{id} reads. Each turn stores its own new items once, and
 * the conversation is rebuilt by walking previous_response_id back (within the namespace): a
 * follow-up never copies the history, and a chain's total size is bounded
 * (RESPONSES_MAX_CHAIN_BYTES). An answer past its expiry reads as unknown at once; the hourly sweep
 * deletes it once no response continues it (its successors still need its items).
 */
@Injectable()
export class ResponsesRepository implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(ResponsesRepository.name);
  private periodic?: { stop(): Promise<void> };

  constructor(
    private readonly sweeps: ClusterSweeps,
    private readonly prisma: PrismaService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.periodic = this.sweeps.every('expired-responses', 3600_000, () => this.sweep(), (err) => this.logger.warn(`Deleting expired responses failed: ${errorSummary(err)}`));
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
  async save(namespaceId: string, userId: string, response: ResponseObject, itemsJson: string, previousChainBytes: number): Promise<void> {
    const expiresAt = new Date(Date.now() + this.config.RESPONSES_TTL_DAYS * DAY_MS);
    const responseJson = JSON.stringify(response);
    const chainBytes = previousChainBytes + Buffer.byteLength(responseJson) + Buffer.byteLength(itemsJson);
    await this.prisma.$executeRaw`
      WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
      INSERT INTO responses (id, namespace_id, user_id, previous_response_id, response, input_items, items_delta, chain_bytes, expires_at)
      SELECT ${response.id}, ${namespaceId}::uuid, ${userId}::uuid, ${(response.previous_response_id as string | null) ?? null},
             ${responseJson}::jsonb, ${itemsJson}::jsonb, true, ${chainBytes}, ${expiresAt} FROM relaxed`;
  }

  /**
   * A stored response's new state (a background response's status, then its answer), only while its
   * status is one of `from`: false when it has moved on (cancelled, or ended by another run).
   */
  async update(id: string, response: ResponseObject, from: readonly string[]): Promise<boolean> {
    // jsonb stores no NUL, and an upstream's error text (a failed run's answer) is the one field no input check has seen.
    const responseJson = JSON.stringify(response).replace(/\\u0000/g, '\\ufffd');
    const count = await this.prisma.$executeRaw`
      UPDATE responses SET response = ${responseJson}::jsonb,
        chain_bytes = chain_bytes - octet_length(response::text) + octet_length(${responseJson})
      WHERE id = ${id} AND response->>'status' = ANY(${[...from]}::text[])`;
    return count === 1;
  }

  /**
   * Refuses a turn that would take its chain past RESPONSES_MAX_CHAIN_BYTES (the new input counted
   * now; the answer is bounded by its tokens), before any model runs.
   */
  checkChainRoom(previousChainBytes: number, itemsJson: string): void {
    const max = this.config.RESPONSES_MAX_CHAIN_BYTES;
    const total = previousChainBytes + Buffer.byteLength(itemsJson);
    if (total > max) {
      const message = `The conversation of previous_response_id would hold ${total} bytes, more than the ${max} a conversation may store (RESPONSES_MAX_CHAIN_BYTES); start a new conversation, or send it with store: false`;
      throw new ApiError('invalid_request', message, { fields: [{ field: 'previous_response_id', message }] });
    }
  }

  /** The chain ending at `id`, oldest first, within the head's namespace (ancestors may be past their own expiry). */
  private async chain(id: string): Promise<(ChainRow & { namespace_id: string })[]> {
    return this.prisma.$queryRaw<(ChainRow & { namespace_id: string })[]>`
      WITH RECURSIVE chain AS (
        SELECT id, previous_response_id, response, input_items, items_delta, chain_bytes, namespace_id, 0 AS depth
          FROM responses WHERE id = ${id} AND expires_at > now()
        UNION ALL
        SELECT r.id, r.previous_response_id, r.response, r.input_items, r.items_delta, r.chain_bytes, r.namespace_id, c.depth + 1
          FROM responses r JOIN chain c ON r.id = c.previous_response_id
         WHERE c.items_delta AND r.namespace_id = c.namespace_id
      )
      SELECT id, response, input_items, items_delta, chain_bytes, namespace_id::text FROM chain ORDER BY depth DESC`;
  }

  /**
   * A live stored answer the caller may read (`readable` says which namespaces), else 404 with
   * OpenAI's text: unknown, expired and foreign ids alike, so other tenants' ids cannot be probed.
   */
  async get(id: string, readable: (namespaceId: string) => Promise<boolean>, param?: string): Promise<StoredConversation> {
    const rows = wellFormed(id) ? await this.chain(id) : [];
    const head = rows.at(-1);
    if (!head || !(await readable(head.namespace_id))) {
      const message = param ? `Previous response with id '${id}' not found.` : `Response with id '${id}' not found.`;
      throw new ApiError('resource_not_found', message, param ? { fields: [{ field: param, message }] } : undefined);
    }
    return { response: head.response, inputItems: conversation(rows), chainBytes: Number(head.chain_bytes) };
  }

  /** The namespace of a live stored response (undefined: unknown or expired), without reading its chain. */
  async namespaceOf(id: string): Promise<string | undefined> {
    if (!wellFormed(id)) return undefined;
    const [row] = await this.prisma.$queryRaw<{ namespace_id: string }[]>`SELECT namespace_id::text FROM responses WHERE id = ${id} AND expires_at > now()`;
    return row?.namespace_id;
  }

  /**
   * Deletes an answer. The responses that continue it still need its items: each gets its whole
   * conversation written out first (as rows were stored before turns were stored once).
   */
  async delete(id: string, readable: (namespaceId: string) => Promise<boolean>): Promise<void> {
    await this.get(id, readable);
    const children = await this.prisma.storedResponse.findMany({ where: { previousResponseId: id, itemsDelta: true }, select: { id: true } });
    for (const child of children) {
      const rows = await this.chain(child.id);
      if (rows.at(-1)?.id !== child.id) continue;
      await this.prisma.storedResponse.update({ where: { id: child.id }, data: { inputItems: conversation(rows) as unknown as Prisma.InputJsonValue, itemsDelta: false } });
    }
    await this.prisma.storedResponse.deleteMany({ where: { id } });
  }

  /** Expired answers that nothing continues; a chain goes from its newest end, a link per round. */
  private async sweep(): Promise<void> {
    for (let round = 0; round < SWEEP_ROUNDS; round++) {
      const deleted = await this.prisma.$executeRaw`
        DELETE FROM responses WHERE id IN (
          SELECT r.id FROM responses r WHERE r.expires_at <= now()
             AND NOT EXISTS (SELECT 1 FROM responses c WHERE c.previous_response_id = r.id)
           LIMIT ${SWEEP_BATCH})`;
      if (deleted === 0) return;
    }
  }
}
