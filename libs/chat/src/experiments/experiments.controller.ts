import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { CurrentCaller, RequiresScope, type Caller } from '@atelier/auth';
import { invalid } from '../chat-request';
import { Experiments } from './experiments.service';

function namespaceParam(namespace: unknown): string | undefined {
  if (namespace !== undefined && (typeof namespace !== 'string' || namespace.includes('\0'))) throw invalid([{ field: 'namespace', message: 'namespace must be given once, as a string' }]);
  return namespace;
}

/** POST/GET /api/ai/experiments, GET/DELETE .../{name}, POST .../{name}/promote. */
@Controller('api/ai/experiments')
@RequiresScope('chat')
export class ExperimentsController {
  constructor(private readonly experiments: Experiments) {}

  @Post()
  @HttpCode(201)
  create(@CurrentCaller() caller: Caller, @Body() body: unknown) {
    return this.experiments.create(caller, body);
  }

  @Get()
  list(@CurrentCaller() caller: Caller, @Query('namespace') namespace: unknown) {
    return this.experiments.list(caller, namespaceParam(namespace));
  }

  @Get(':name')
  get(@CurrentCaller() caller: Caller, @Param('name') name: string, @Query('namespace') namespace: unknown) {
    return this.experiments.get(caller, name, namespaceParam(namespace));
  }

  @Post(':name/promote')
  @HttpCode(200)
  promote(@CurrentCaller() caller: Caller, @Param('name') name: string, @Body() body: unknown, @Query('namespace') namespace: unknown) {
    return this.experiments.promote(caller, name, body, namespaceParam(namespace));
  }

  @Delete(':name')
  delete(@CurrentCaller() caller: Caller, @Param('name') name: string, @Query('namespace') namespace: unknown) {
    return this.experiments.delete(caller, name, namespaceParam(namespace));
  }
}
