import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { AccountsService } from './accounts.service';
import { ApiKeys } from './api-keys.service';
import { AdminRoute } from '@atelier/auth';
import { ADMIN_USAGE_GROUPS, sendUsage, UsageReports, type UsageQuery } from '@atelier/billing';
import { AdjustCreditsRequest, CreateOrgRequest, CreateUserRequest, NamespaceLimitsRequest } from '@atelier/contracts';
import { parseBody } from '@atelier/runtime';

/** Operator interface; enabled only when ADMIN_TOKEN is set. */
@AdminRoute()
@Controller('api/admin')
export class AdminController {
  constructor(
    private readonly accounts: AccountsService,
    private readonly apiKeys: ApiKeys,
    private readonly usageReports: UsageReports,
  ) {}

  /** Usage over every namespace (or one, ?namespace=), also groupable by namespace. */
  @Get('usage')
  async usage(@Query() query: UsageQuery & { namespace?: unknown; format?: unknown }, @Res() reply: FastifyReply): Promise<void> {
    // A repeated ?namespace= is looked up as given (String of the list), so it is a 404 like any unknown name.
    const scope = query.namespace === undefined || query.namespace === '' ? undefined : await this.accounts.findNamespace(String(query.namespace));
    await sendUsage(reply, await this.usageReports.report(scope, query, ADMIN_USAGE_GROUPS), query.format);
  }

  @Post('users')
  @HttpCode(201)
  createUser(@Body() body: unknown) {
    const req = parseBody(CreateUserRequest, body);
    return this.accounts.createUser(req.username, req.credits);
  }

  @Post('users/:username/api_keys')
  @HttpCode(201)
  createApiKey(@Param('username') username: string, @Body() body: unknown) {
    return this.apiKeys.createForUser(username, body);
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

  /** Adds the user to the org; idempotent. */
  @Put('orgs/:org/members/:username')
  addMember(@Param('org') org: string, @Param('username') username: string) {
    return this.accounts.addMember(org, username);
  }

  /** Removes the user and revokes their keys bound to the org, on every replica. */
  @Delete('orgs/:org/members/:username')
  removeMember(@Param('org') org: string, @Param('username') username: string) {
    return this.accounts.removeMember(org, username);
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
