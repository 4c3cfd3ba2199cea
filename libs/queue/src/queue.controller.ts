import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { CountsAsWork, CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { CancelGeneration } from './cancel-generation.use-case';
import { EnqueueGenerations } from './enqueue-generations.use-case';
import { GenerationWebhooks } from './generation-webhooks.use-case';
import { ReadGenerations, type ListQuery } from './read-generations.use-case';
import { RouteConfig } from '@nestjs/platform-fastify';
import { IDEMPOTENT } from '@atelier/idempotency';

/** The asynchronous generation queue: POST/GET/DELETE /api/ai/queue. */
@Controller('api/ai/queue')
@RequiresScope('queue')
export class QueueController {
  constructor(
    private readonly enqueuing: EnqueueGenerations,
    private readonly reads: ReadGenerations,
    private readonly cancelling: CancelGeneration,
    private readonly webhookDeliveries: GenerationWebhooks,
  ) {}

  @Post()
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  enqueue(@CurrentCaller() caller: Caller, @Body() body: unknown) {
    return this.enqueuing.enqueue(caller, body);
  }

  @Get()
  list(@CurrentCaller() caller: Caller, @Query() query: ListQuery) {
    return this.reads.list(caller, query);
  }

  @Get(':id')
  get(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.reads.get(caller, id);
  }

  @Get(':id/webhooks')
  webhooks(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.webhookDeliveries.deliveries(caller, id);
  }

  @Delete(':id')
  cancel(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.cancelling.cancel(caller, id);
  }
}
