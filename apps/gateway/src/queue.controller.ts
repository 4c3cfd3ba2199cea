import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { CurrentCaller, NamespaceAccess, type Caller } from '@atelier/auth';
import { ApiError } from '@atelier/contracts';
import { GenerationQueue, type ListQuery } from '@atelier/generations';

/** The asynchronous generation queue: POST/GET/DELETE /api/ai/queue. */
@Controller('api/ai/queue')
export class QueueController {
  constructor(
    private readonly generations: GenerationQueue,
    private readonly access: NamespaceAccess,
  ) {}

  @Post()
  @HttpCode(200)
  async enqueue(@CurrentCaller() caller: Caller, @Body() body: unknown) {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('Request body must be a JSON object');
    const scope = await this.access.resolve(caller, (body as Record<string, unknown>).target_namespace);
    return this.generations.enqueue(caller, scope, body as Record<string, unknown>);
  }

  @Get()
  async list(@CurrentCaller() caller: Caller, @Query() query: ListQuery) {
    const scope = await this.access.resolve(caller, query.namespace);
    return this.generations.list(scope, query);
  }

  @Get(':id')
  get(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.generations.get(caller, id);
  }

  @Delete(':id')
  cancel(@CurrentCaller() caller: Caller, @Param('id') id: string) {
    return this.generations.cancel(caller, id);
  }
}
