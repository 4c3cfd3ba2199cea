import { Injectable } from '@nestjs/common';
import { Prisma, PrismaService } from '@atelier/db';

export interface FeedbackMetricRow {
  id: string;
  namespaceId: string;
  name: string;
  type: 'boolean' | 'float';
  optimize: 'max' | 'min';
  createdAt: Date;
}

/** Feedback metrics (declared per namespace) and the feedback given on stored completions and responses. */
@Injectable()
export class FeedbackRepository {
  constructor(private readonly prisma: PrismaService) {}

  /** A new metric, or undefined when the namespace has one of that name already. */
  async createMetric(metric: Omit<FeedbackMetricRow, 'id' | 'createdAt'>): Promise<FeedbackMetricRow | undefined> {
    try {
      return (await this.prisma.feedbackMetric.create({ data: metric })) as FeedbackMetricRow;
    } catch (err) {
      if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002') return undefined;
      throw err;
    }
  }

  async metrics(namespaceId: string): Promise<FeedbackMetricRow[]> {
    return (await this.prisma.feedbackMetric.findMany({ where: { namespaceId }, orderBy: { name: 'asc' } })) as FeedbackMetricRow[];
  }

  async metric(namespaceId: string, name: string): Promise<FeedbackMetricRow | undefined> {
    return ((await this.prisma.feedbackMetric.findUnique({ where: { namespaceId_name: { namespaceId, name } } })) as FeedbackMetricRow | null) ?? undefined;
  }

  async add(feedback: { metricId: string; targetId: string; completionId: string | null; value: number; comment: string | null; userId: string }): Promise<{ id: string; createdAt: Date }> {
    return this.prisma.feedback.create({ data: feedback, select: { id: true, createdAt: true } });
  }

  /** The feedback on one target (a response, or a completion), oldest first, with its metric's name. */
  async on(targetId: string): Promise<{ id: string; targetId: string; metric: string; value: number; comment: string | null; createdAt: Date }[]> {
    const rows = await this.prisma.feedback.findMany({ where: { targetId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }], include: { metric: { select: { name: true } } } });
    return rows.map((r) => ({ id: r.id, targetId: r.targetId, metric: r.metric.name, value: r.value, comment: r.comment, createdAt: r.createdAt }));
  }
}
