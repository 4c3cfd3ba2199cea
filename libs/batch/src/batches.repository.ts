import { Injectable } from '@nestjs/common';
import { Prisma, PrismaService, type BatchLineModel, type BatchModel } from '@atelier/db';

/** An open transaction, handed to this repository's methods and to the ledger so a batch's rows and its money change together. */
export type BatchTx = Prisma.TransactionClient;

/** What a line ends as: its answer (or error) for the output files, and the tokens it used. */
export interface LineEnding {
  status: 'succeeded' | 'failed';
  response: { status_code: number; request_id: string; body: unknown } | null;
  error: { code: string; message: string } | null;
  inputTokens: number;
  outputTokens: number;
}

export interface NewLine {
  id: string;
  lineNo: number;
  customId: string;
  model: string;
  body: Record<string, unknown>;
  reservationId: string;
  /** A line whose body its model refused ends at once with that answer (and no reservation). */
  ending?: LineEnding;
}

/** A batch's lines by state, and the tokens its ended lines used: request_counts and usage. */
export interface BatchTally {
  total: number;
  completed: number;
  failed: number;
  open: number;
  running: number;
  inputTokens: number;
  outputTokens: number;
}

const EMPTY_TALLY: BatchTally = { total: 0, completed: 0, failed: 0, open: 0, running: 0, inputTokens: 0, outputTokens: 0 };

/** An unpublished batch.status event of the outbox. */
export interface BatchEventRow {
  id: bigint;
  user_id: string;
  data: Record<string, unknown>;
  webhook_url: string | null;
  webhook_id: string | null;
  namespace_id: string;
}

/** A line claimed to run, with what its batch says about who pays and where. */
export type ClaimedLine = BatchLineModel & { batch: Pick<BatchModel, 'id' | 'namespaceId' | 'userId' | 'endpoint' | 'keyPrefix' | 'apiKeyId' | 'hasBudget' | 'status' | 'requestId'> & { namespace: { name: string } } };

/** The batches and batch_lines tables: one namespace's batches, their lines and what those answered. */
@Injectable()
export class BatchesRepository {
  constructor(private readonly prisma: PrismaService) {}

  inTransaction<T>(work: (tx: BatchTx) => Promise<T>): Promise<T> {
    // A 50,000-line batch's lines and reservations are written in one transaction.
    return this.prisma.$transaction(work, { timeout: 120_000, maxWait: 10_000 });
  }

  create(data: Prisma.BatchUncheckedCreateInput): Promise<BatchModel> {
    return this.prisma.batch.create({ data });
  }

  find(namespaceId: string, id: string): Promise<BatchModel | null> {
    return this.prisma.batch.findFirst({ where: { id, namespaceId } });
  }

  byId(id: string, tx: BatchTx = this.prisma): Promise<BatchModel | null> {
    return tx.batch.findUnique({ where: { id } });
  }

  /** A page of the namespace's batches, newest first, after the batch `after`. */
  page(namespaceId: string, limit: number, after?: { id: string; createdAt: Date }): Promise<BatchModel[]> {
    return this.prisma.batch.findMany({
      where: { namespaceId, ...(after && { OR: [{ createdAt: { lt: after.createdAt } }, { createdAt: after.createdAt, id: { lt: after.id } }] }) },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      take: limit + 1,
    });
  }

  /**
   * Moves the batch from one of `from` to `to` with `data` (its `*_at` stamp); false when it was
   * in none of them (another process moved it first, or it ended): the caller then does nothing.
   */
  async transition(id: string, from: readonly string[], to: string, data: Prisma.BatchUncheckedUpdateManyInput = {}, tx: BatchTx = this.prisma): Promise<boolean> {
    const { count } = await tx.batch.updateMany({ where: { id, status: { in: [...from] } }, data: { ...data, status: to } });
    return count === 1;
  }

  /** Each batch's lines by state and its tokens (request_counts, usage), read live from its lines. */
  async tallies(ids: string[], tx: BatchTx = this.prisma): Promise<Map<string, BatchTally>> {
    const out = new Map<string, BatchTally>();
    if (ids.length === 0) return out;
    const rows = await tx.$queryRaw<{ batch_id: string; status: string; n: bigint; input: bigint | null; output: bigint | null }[]>`
      SELECT batch_id::text, status, count(*) AS n, sum(input_tokens) AS input, sum(output_tokens) AS output
      FROM batch_lines WHERE batch_id = ANY(${ids}::uuid[]) GROUP BY batch_id, status`;
    for (const r of rows) {
      const t = out.get(r.batch_id) ?? { ...EMPTY_TALLY };
      const n = Number(r.n);
      t.total += n;
      if (r.status === 'succeeded') t.completed += n;
      else if (r.status === 'pending' || r.status === 'running') t.open += n;
      else t.failed += n;
      if (r.status === 'running') t.running += n;
      t.inputTokens += Number(r.input ?? 0);
      t.outputTokens += Number(r.output ?? 0);
      out.set(r.batch_id, t);
    }
    return out;
  }

  async tally(id: string, tx: BatchTx = this.prisma): Promise<BatchTally> {
    return (await this.tallies([id], tx)).get(id) ?? { ...EMPTY_TALLY };
  }

  /** Writes a validated batch's lines (in slices: a statement's parameters are bounded). */
  async insertLines(batchId: string, lines: NewLine[], tx: BatchTx): Promise<void> {
    for (let i = 0; i < lines.length; i += 2000) {
      await tx.batchLine.createMany({
        data: lines.slice(i, i + 2000).map((l) => ({
          id: l.id,
          batchId,
          lineNo: l.lineNo,
          customId: l.customId,
          model: l.model,
          body: l.body as Prisma.InputJsonValue,
          reservationId: l.reservationId,
          ...(l.ending && {
            status: l.ending.status,
            response: (l.ending.response ?? Prisma.DbNull) as Prisma.InputJsonValue,
            error: (l.ending.error ?? Prisma.DbNull) as Prisma.InputJsonValue,
            endedAt: new Date(),
          }),
        })),
      });
    }
  }

  /** The pending lines of a batch (id only), in line order: what its dispatch queues. */
  async pendingLines(batchId: string): Promise<string[]> {
    const rows = await this.prisma.batchLine.findMany({ where: { batchId, status: 'pending' }, select: { id: true }, orderBy: { lineNo: 'asc' } });
    return rows.map((r) => r.id);
  }

  /**
   * Claims a line to run: pending, or running (its last worker died: the job came back). Only
   * while its batch runs or is being cancelled (a running line finishes). Null: nothing to run.
   */
  async claim(lineId: string): Promise<ClaimedLine | null> {
    const rows = await this.prisma.$queryRaw<{ id: string }[]>`
      UPDATE batch_lines l SET status = 'running', attempts = l.attempts + 1, started_at = now()
      FROM batches b
      WHERE l.id = ${lineId}::uuid AND b.id = l.batch_id
        AND (l.status = 'pending' AND b.status = 'in_progress' OR l.status = 'running' AND b.status IN ('in_progress', 'cancelling'))
      RETURNING l.id::text`;
    if (rows.length === 0) return null;
    return this.prisma.batchLine.findUnique({
      where: { id: lineId },
      include: { batch: { select: { id: true, namespaceId: true, userId: true, endpoint: true, keyPrefix: true, apiKeyId: true, hasBudget: true, status: true, requestId: true, namespace: { select: { name: true } } } } },
    }) as Promise<ClaimedLine | null>;
  }

  /** Ends a running line; false when it was not running (another ending won): the caller settles nothing. */
  async finish(lineId: string, ending: LineEnding, tx: BatchTx): Promise<boolean> {
    const { count } = await tx.batchLine.updateMany({
      where: { id: lineId, status: 'running' },
      data: {
        status: ending.status,
        response: (ending.response ?? Prisma.DbNull) as Prisma.InputJsonValue,
        error: (ending.error ?? Prisma.DbNull) as Prisma.InputJsonValue,
        inputTokens: ending.inputTokens,
        outputTokens: ending.outputTokens,
        endedAt: new Date(),
      },
    });
    return count === 1;
  }

  /**
   * Ends every pending line of the batch as `status` with `error` (a cancel, an expiry) and
   * returns their reservations, to release in the same transaction.
   */
  async dropPending(batchId: string, status: 'cancelled' | 'expired', error: { code: string; message: string }, tx: BatchTx): Promise<string[]> {
    const rows = await tx.$queryRaw<{ reservation_id: string }[]>`
      UPDATE batch_lines SET status = ${status}, error = ${JSON.stringify(error)}::jsonb, ended_at = now()
      WHERE batch_id = ${batchId}::uuid AND status = 'pending'
      RETURNING reservation_id::text`;
    return rows.map((r) => r.reservation_id);
  }

  /** A slice of the batch's ended lines in line order, after `afterLine`: what the output files are written from. */
  endedLines(batchId: string, afterLine: number, take: number): Promise<Pick<BatchLineModel, 'id' | 'lineNo' | 'customId' | 'status' | 'response' | 'error'>[]> {
    return this.prisma.batchLine.findMany({
      where: { batchId, lineNo: { gt: afterLine } },
      select: { id: true, lineNo: true, customId: true, status: true, response: true, error: true },
      orderBy: { lineNo: 'asc' },
      take,
    });
  }

  /** Of these reservations, those a line still waiting or running owns (the stale sweep keeps them). */
  async reservationsInUse(ids: string[]): Promise<Set<string>> {
    const rows = await this.prisma.batchLine.findMany({ where: { reservationId: { in: ids }, status: { in: ['pending', 'running'] } }, select: { reservationId: true } });
    return new Set(rows.map((r) => r.reservationId));
  }

  /** Batches in a state for longer than `olderThanMs` (the sweep's lost steps), oldest first. */
  stuck(statuses: readonly string[], olderThanMs: number, limit = 100): Promise<Pick<BatchModel, 'id' | 'status' | 'requestId'>[]> {
    return this.prisma.batch.findMany({
      where: { status: { in: [...statuses] }, createdAt: { lt: new Date(Date.now() - olderThanMs) } },
      select: { id: true, status: true, requestId: true },
      orderBy: { createdAt: 'asc' },
      take: limit,
    });
  }

  async namespaceName(namespaceId: string): Promise<string> {
    const ns = await this.prisma.namespace.findUniqueOrThrow({ where: { id: namespaceId }, select: { name: true } });
    return ns.name;
  }

  /** When a line of the batch last started or ended (null: none has yet). */
  async lastLineActivity(batchId: string): Promise<Date | null> {
    const [row] = await this.prisma.$queryRaw<{ at: Date | null }[]>`
      SELECT greatest(max(started_at), max(ended_at)) AS at FROM batch_lines WHERE batch_id = ${batchId}::uuid`;
    return row?.at ?? null;
  }

  /** Whether any line still waits or runs (one index probe, where a tally counts every line: this runs after each line). */
  async hasOpenLines(batchId: string): Promise<boolean> {
    const rows = await this.prisma.$queryRaw<unknown[]>`SELECT 1 FROM batch_lines WHERE batch_id = ${batchId}::uuid AND status IN ('pending', 'running') LIMIT 1`;
    return rows.length > 0;
  }

  async hasLineIn(batchId: string, status: string): Promise<boolean> {
    return (await this.prisma.batchLine.findFirst({ where: { batchId, status }, select: { id: true } })) !== null;
  }

  /** A status change's event, written in the transition's transaction (the outbox). */
  async recordEvent(tx: BatchTx, event: { batchId: string; userId: string; data: Prisma.InputJsonValue; webhookUrl: string | null; webhookId: string | null }): Promise<void> {
    await tx.batchEvent.create({ data: event });
  }

  /**
   * Hands the batch's unpublished events to `publish` in order, each marked published once
   * `publish` returns; rows are claimed with SKIP LOCKED, so two publishers never take the same one.
   */
  async publishEvents(batchId: string, publish: (row: BatchEventRow) => Promise<void>): Promise<void> {
    await this.prisma.$transaction(async (tx) => {
      const rows = await tx.$queryRaw<BatchEventRow[]>`
        SELECT e.id, e.user_id::text, e.data, e.webhook_url, e.webhook_id, b.namespace_id::text
        FROM batch_events e JOIN batches b ON b.id = e.batch_id
        WHERE e.batch_id = ${batchId}::uuid AND e.published_at IS NULL ORDER BY e.id FOR UPDATE OF e SKIP LOCKED`;
      for (const row of rows) {
        await publish(row);
        await tx.$executeRaw`UPDATE batch_events SET published_at = now() WHERE id = ${row.id}`;
      }
    });
  }

  /** Batches with events unpublished for longer than `olderThanMs`. */
  async withStrandedEvents(olderThanMs: number, limit = 100): Promise<string[]> {
    const rows = await this.prisma.$queryRaw<{ batch_id: string }[]>`
      SELECT DISTINCT batch_id::text FROM batch_events
      WHERE published_at IS NULL AND created_at < now() - (${olderThanMs}::int * interval '1 millisecond') LIMIT ${limit}`;
    return rows.map((r) => r.batch_id);
  }

  /** Running batches whose window has passed. */
  expired(now = new Date(), limit = 100): Promise<Pick<BatchModel, 'id' | 'requestId'>[]> {
    return this.prisma.batch.findMany({ where: { status: { in: ['validating', 'in_progress'] }, expiresAt: { lte: now } }, select: { id: true, requestId: true }, take: limit });
  }
}
