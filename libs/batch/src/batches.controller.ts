import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import { CountsAsWork, CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { IDEMPOTENT } from '@atelier/idempotency';
import { BatchesService } from './batches.service';

/** OpenAI's Batch API (the SDK's `client.batches.*` with baseURL `<atelier>/api/ai`): the caller's namespace's batches. */
@Controller('api/ai/batches')
@RequiresScope('batches')
export class BatchesController {
  constructor(private readonly batches: BatchesService) {}

  @Post()
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  create(@CurrentCaller() caller: Caller, @Body() body: unknown) {
    return this.batches.create(caller, body);
  }

  @Get()
  list(@CurrentCaller() caller: Caller, @Query() query: Record<string, unknown>) {
    return this.batches.list(caller, query);
  }

  @Get(':id')
  get(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.batches.get(caller, id);
  }

  @Post(':id/cancel')
  @HttpCode(200)
  cancel(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.batches.cancel(caller, id);
  }
}
