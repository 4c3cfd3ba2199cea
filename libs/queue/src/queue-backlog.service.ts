import { Injectable } from '@nestjs/common';
import { GenerationsRepository } from './generations.repository';

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
  constructor(private readonly generations: GenerationsRepository) {}

  async pools(): Promise<PoolBacklog[]> {
    const rows = await this.generations.activeByPoolAndNamespace();
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
