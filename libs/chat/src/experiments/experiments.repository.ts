import { Injectable } from '@nestjs/common';
import { Prisma, PrismaService } from '@atelier/db';
import type { MetricTally, Variant } from './experiment-weights';

export interface ExperimentRow {
  id: string;
  namespaceId: string;
  name: string;
  mode: 'fixed' | 'adaptive';
  metricId: string | null;
  stickyBy: string | null;
  minWeight: number;
  variants: Variant[];
  status: 'running' | 'promoted';
  promotedModel: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface ExperimentEventRow {
  kind: 'created' | 'weights' | 'promoted';
  variants: Variant[];
  model: string | null;
  createdAt: Date;
}

/** A variant's requests as GET /api/ai/experiments/{name} reports them. */
export interface VariantRequestStats {
  variant: string;
  requests: number;
  failed: number;
  p50: number | null;
  p95: number | null;
  cost: string;
}

const select = {
  id: true,
  namespaceId: true,
  name: true,
  mode: true,
  metricId: true,
  stickyBy: true,
  minWeight: true,
  variants: true,
  status: true,
  promotedModel: true,
  createdAt: true,
  updatedAt: true,
} as const;

/** Prisma types the JSON columns loosely; these rows were written from the typed shapes above. */
const asRow = (r: unknown) => r as ExperimentRow;
const asRows = (r: unknown) => r as ExperimentRow[];

/** Experiments, the requests they routed and their history. */
@Injectable()
export class ExperimentsRepository {
  constructor(private readonly prisma: PrismaService) {}

  /** A new experiment with its first history entry, or undefined when the namespace has one of that name. */
  async create(e: Pick<ExperimentRow, 'namespaceId' | 'name' | 'mode' | 'metricId' | 'stickyBy' | 'minWeight' | 'variants'>): Promise<ExperimentRow | undefined> {
    try {
      return asRow(
        await this.prisma.experiment.create({
          data: { ...e, variants: e.variants as unknown as Prisma.InputJsonValue, status: 'running', events: { create: { kind: 'created', variants: e.variants as unknown as Prisma.InputJsonValue } } },
          select,
        }),
      );
    } catch (err) {
      if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002') return undefined;
      throw err;
    }
  }

  async inNamespace(namespaceId: string): Promise<ExperimentRow[]> {
    return asRows(await this.prisma.experiment.findMany({ where: { namespaceId }, orderBy: { name: 'asc' }, select }));
  }

  async named(namespaceId: string, name: string): Promise<ExperimentRow | undefined> {
    return asRow(await this.prisma.experiment.findUnique({ where: { namespaceId_name: { namespaceId, name } }, select })) ?? undefined;
  }

  async byId(id: string): Promise<ExperimentRow | undefined> {
    return asRow(await this.prisma.experiment.findUnique({ where: { id }, select })) ?? undefined;
  }

  async delete(id: string): Promise<void> {
    await this.prisma.experiment.deleteMany({ where: { id } });
  }

  /** All traffic to one variant, kept in the history; undefined when the experiment is gone. */
  async promote(id: string, variants: Variant[], model: string): Promise<ExperimentRow | undefined> {
    const json = variants as unknown as Prisma.InputJsonValue;
    const [updated] = await this.prisma.$transaction([
      this.prisma.experiment.updateManyAndReturn({ where: { id }, data: { variants: json, status: 'promoted', promotedModel: model, updatedAt: new Date() }, select }),
      this.prisma.experimentEvent.create({ data: { experimentId: id, kind: 'promoted', variants: json, model } }),
    ]);
    return updated.length > 0 ? asRow(updated[0]) : undefined;
  }

  /**
   * Works an adaptive experiment's weights out again from all the feedback on its metric, with its
   * row locked: concurrent feedback reweighs one after another, each from what the one before
   * committed, so the last weights written always count every judgement. Only while it runs (a
   * promote wins over a late update). `decide` gets the tallies and the weights last kept in the
   * history; it answers the new weights and whether to keep them in the history, or undefined.
   */
  async reweigh(
    id: string,
    metricId: string,
    decide: (current: ExperimentRow, tallies: Map<string, MetricTally>, lastRecorded: Variant[]) => { variants: Variant[]; record: boolean } | undefined,
  ): Promise<boolean> {
    return this.prisma.$transaction(async (tx) => {
      const locked = await tx.$queryRaw<{ id: string }[]>`SELECT id FROM experiments WHERE id = ${id}::uuid AND status = 'running' FOR UPDATE`;
      if (locked.length === 0) return false;
      const current = asRow(await tx.experiment.findUnique({ where: { id }, select }));
      const tallies = await this.metricTallies(id, metricId, tx);
      const last = await tx.experimentEvent.findFirst({ where: { experimentId: id, kind: { in: ['created', 'weights'] } }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], select: { variants: true } });
      const decided = decide(current, tallies, (last?.variants as Variant[] | undefined) ?? current.variants);
      if (!decided) return false;
      const json = decided.variants as unknown as Prisma.InputJsonValue;
      await tx.experiment.update({ where: { id }, data: { variants: json, updatedAt: new Date() } });
      if (decided.record) await tx.experimentEvent.create({ data: { experimentId: id, kind: 'weights', variants: json } });
      return true;
    });
  }

  async history(id: string): Promise<ExperimentEventRow[]> {
    return (await this.prisma.experimentEvent.findMany({
      where: { experimentId: id },
      orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
      select: { kind: true, variants: true, model: true, createdAt: true },
    })) as unknown as ExperimentEventRow[];
  }

  async record(r: { experimentId: string; variant: string; completionId: string; outcome: string; durationMs: number; cost: string | null }): Promise<void> {
    await this.prisma.experimentRequest.create({ data: { ...r, durationMs: Math.round(r.durationMs) } });
  }

  /** The experiment that answered this completion, if any. */
  async experimentOf(completionId: string): Promise<string | undefined> {
    const row = await this.prisma.experimentRequest.findFirst({ where: { completionId }, select: { experimentId: true } });
    return row?.experimentId;
  }

  async requestStats(experimentId: string): Promise<VariantRequestStats[]> {
    const rows = await this.prisma.$queryRaw<{ variant: string; requests: bigint; failed: bigint; p50: number | null; p95: number | null; cost: string | null }[]>`
      SELECT variant,
             count(*) AS requests,
             count(*) FILTER (WHERE outcome <> 'succeeded') AS failed,
             percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE outcome = 'succeeded') AS p50,
             percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE outcome = 'succeeded') AS p95,
             coalesce(sum(cost), 0)::text AS cost
        FROM experiment_requests WHERE experiment_id = ${experimentId}::uuid GROUP BY variant`;
    return rows.map((r) => ({ variant: r.variant, requests: Number(r.requests), failed: Number(r.failed), p50: r.p50, p95: r.p95, cost: r.cost ?? '0' }));
  }

  /** Feedback on the metric given on each variant's answers: one value per answer and metric (the latest counts). */
  async metricTallies(experimentId: string, metricId: string, tx: Pick<PrismaService, '$queryRaw'> = this.prisma): Promise<Map<string, MetricTally>> {
    const rows = await tx.$queryRaw<{ variant: string; count: bigint; sum: number; sum_squares: number }[]>`
      SELECT r.variant, count(*) AS count, sum(f.value) AS sum, sum(f.value * f.value) AS sum_squares
        FROM experiment_requests r
        JOIN LATERAL (SELECT value FROM feedback WHERE completion_id = r.completion_id AND metric_id = ${metricId}::uuid ORDER BY created_at DESC, id DESC LIMIT 1) f ON true
       WHERE r.experiment_id = ${experimentId}::uuid
       GROUP BY r.variant`;
    return new Map(rows.map((r) => [r.variant, { count: Number(r.count), sum: Number(r.sum), sumSquares: Number(r.sum_squares) }]));
  }
}
