import { Injectable } from '@nestjs/common';
import { PrismaService } from '@atelier/db';

export interface PoolBacklog {
  pool: 'image' | 'video';
  queued: number;
  processing: number;
  /** Namespaces with generations queued or processing, most queued first. */
  namespaces: { namespace: string; queue_weight: number; queued: number; processing: number }[];
}

/** GET /api/admin/queues: what each pool holds, per namespace, from the generation rows (the truth the queue is rebuilt from). */
@Injectable()
export class QueueBacklog {
  constructor(private readonly prisma: PrismaService) {}

  async pools(): Promise<PoolBacklog[]> {
    const rows = await this.prisma.$queryRaw<{ pool: 'image' | 'video'; namespace: string; queue_weight: number | null; queued: number; processing: number }[]>`
      SELECT g.media_type::text AS pool, n.name AS namespace, n.queue_weight,
             count(*) FILTER (WHERE g.status = 'queued')::int AS queued,
             count(*) FILTER (WHERE g.status = 'processing')::int AS processing
      FROM generations g JOIN namespaces n ON n.id = g.namespace_id
      WHERE g.status IN ('queued', 'processing')
      GROUP BY g.media_type, n.name, n.queue_weight
      ORDER BY queued DESC, n.name`;
    return (['image', 'video'] as const).map((pool) => {
      const of = rows.filter((r) => r.pool === pool);
      return {
        pool,
        queued: of.reduce((s, r) => s + r.queued, 0),
        processing: of.reduce((s, r) => s + r.processing, 0),
        namespaces: of.map((r) => ({ namespace: r.namespace, queue_weight: r.queue_weight ?? 1, queued: r.queued, processing: r.processing })),
      };
    });
  }
}
