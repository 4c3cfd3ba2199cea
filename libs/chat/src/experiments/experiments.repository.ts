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
   * New adaptive weights, only while the experiment still runs (a promote wins over a late
   * update); `record` also keeps them in the history.
   */
  async reweigh(id: string, variants: Variant[], record: boolean): Promise<boolean> {
    const json = variants as unknown as Prisma.InputJsonValue;
    return this.prisma.$transaction(async (tx) => {
      const { count } = await tx.experiment.updateMany({ where: { id, status: 'running' }, data: { variants: json, updatedAt: new Date() } });
      if (count === 1 && record) await tx.experimentEvent.create({ data: { experimentId: id, kind: 'weights', variants: json } });
      return count === 1;
    });
  }

  async history(id: string): Promise<ExperimentEventRow[]> {
    return (await this.prisma.experimentEvent.findMany({
      where: { experimentId: id },
      orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
      select: { kind: true, variants: true, model: true, createdAt: true },
    })) as unknown as ExperimentEventRow[];
  }

  async lastWeights(id: string): Promise<Variant[] | undefined> {
    const row = await this.prisma.experimentEvent.findFirst({ where: { experimentId: id, kind: { in: ['created', 'weights'] } }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], select: { variants: true } });
    return (row?.variants as Variant[] | undefined) ?? undefined;
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
  async metricTallies(experimentId: string, metricId: string): Promise<Map<string, MetricTally>> {
    const rows = await this.prisma.$queryRaw<{ variant: string; count: bigint; sum: number; sum_squares: number }[]>`
      SELECT r.variant, count(*) AS count, sum(f.value) AS sum, sum(f.value * f.value) AS sum_squares
        FROM experiment_requests r
        JOIN LATERAL (SELECT value FROM feedback WHERE completion_id = r.completion_id AND metric_id = ${metricId}::uuid ORDER BY created_at DESC, id DESC LIMIT 1) f ON true
       WHERE r.experiment_id = ${experimentId}::uuid
       GROUP BY r.variant`;
    return new Map(rows.map((r) => [r.variant, { count: Number(r.count), sum: Number(r.sum), sumSquares: Number(r.sum_squares) }]));
  }
}
