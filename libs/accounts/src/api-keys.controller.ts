import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiKeys } from './api-keys.service';
import { CurrentCaller, NotRateLimited, RequiresFullAccess, type Caller } from '@atelier/auth';

/** Self-service API keys: POST/GET /api/api_keys, DELETE /api/api_keys/{prefix}. */
@Controller('api/api_keys')
@RequiresFullAccess()
// Key management stays possible on a key that has spent its minute.
@NotRateLimited()
export class ApiKeysController {
  constructor(private readonly keys: ApiKeys) {}

  @Post()
  @HttpCode(201)
  create(@CurrentCaller() caller: Caller, @Body() body: unknown) {
    return this.keys.create(caller, body);
  }

  @Get()
  list(@CurrentCaller() caller: Caller) {
    return this.keys.list(caller);
  }

  @Delete(':prefix')
  revoke(@CurrentCaller() caller: Caller, @Param('prefix') prefix: string) {
    return this.keys.revoke(caller, prefix);
  }
}
