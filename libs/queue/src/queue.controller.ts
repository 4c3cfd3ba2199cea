import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { CountsAsWork, CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { GenerationQueue, type ListQuery } from './generation-queue.service';
import { RouteConfig } from '@nestjs/platform-fastify';
import { IDEMPOTENT } from '@atelier/idempotency';

/** The asynchronous generation queue: POST/GET/DELETE /api/ai/queue. */
@Controller('api/ai/queue')
@RequiresScope('queue')
export class QueueController {
  constructor(private readonly generations: GenerationQueue) {}

  @Post()
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  enqueue(@CurrentCaller() caller: Caller, @Body() body: unknown) {
    return this.generations.enqueue(caller, body);
  }

  @Get()
  list(@CurrentCaller() caller: Caller, @Query() query: ListQuery) {
    return this.generations.list(caller, query);
  }

  @Get(':id')
  get(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.generations.get(caller, id);
  }

  @Get(':id/webhooks')
  webhooks(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.generations.webhookDeliveries(caller, id);
  }

  @Delete(':id')
  cancel(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.generations.cancel(caller, id);
  }
}
