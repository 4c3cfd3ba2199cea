import { Controller, Get } from '@nestjs/common';
import { AdminRoute } from '@atelier/auth';
import { QueueBacklog } from './queue-backlog.service';

/** The operator's view of the generation queue: each pool's backlog per namespace, and its weight. */
@AdminRoute()
@Controller('api/admin/queues')
export class QueueAdminController {
  constructor(private readonly backlog: QueueBacklog) {}

  @Get()
  async pools() {
    return { pools: await this.backlog.pools() };
  }
}
