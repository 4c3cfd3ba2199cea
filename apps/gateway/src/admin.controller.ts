import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import { AccountsService } from '@atelier/accounts';
import { AdminRoute } from '@atelier/auth';
import { AdjustCreditsRequest, CreateOrgRequest, CreateUserRequest, NamespaceLimitsRequest } from '@atelier/contracts';
import { parseBody } from '@atelier/runtime';

/** Operator interface; enabled only when ADMIN_TOKEN is set. */
@AdminRoute()
@Controller('api/admin')
export class AdminController {
  constructor(private readonly accounts: AccountsService) {}

  @Post('users')
  @HttpCode(201)
  createUser(@Body() body: unknown) {
    const req = parseBody(CreateUserRequest, body);
    return this.accounts.createUser(req.username, req.credits);
  }

  @Post('users/:username/api_keys')
  @HttpCode(201)
  createApiKey(@Param('username') username: string) {
    return this.accounts.createApiKey(username);
  }

  @Delete('api_keys/:prefix')
  revokeApiKey(@Param('prefix') prefix: string) {
    return this.accounts.revokeApiKey(prefix);
  }

  @Post('orgs')
  @HttpCode(201)
  createOrg(@Body() body: unknown) {
    const req = parseBody(CreateOrgRequest, body);
    return this.accounts.createOrg(req.name, req.members, req.credits);
  }

  @Post('namespaces/:namespace/credits')
  @HttpCode(200)
  adjustCredits(@Param('namespace') namespace: string, @Body() body: unknown) {
    const req = parseBody(AdjustCreditsRequest, body);
    return this.accounts.adjustCredits(namespace, req.amount);
  }

  /** Takes effect on every gateway within AUTH_CACHE_MS (the limits ride on the cached key). */
  @Put('namespaces/:namespace/limits')
  setLimits(@Param('namespace') namespace: string, @Body() body: unknown) {
    return this.accounts.setLimits(namespace, parseBody(NamespaceLimitsRequest, body));
  }

  @Get('namespaces/:namespace')
  describeNamespace(@Param('namespace') namespace: string) {
    return this.accounts.describeNamespace(namespace);
  }
}
