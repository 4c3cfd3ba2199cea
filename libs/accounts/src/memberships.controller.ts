import { Controller, Delete, Param } from '@nestjs/common';
import { AccountsService } from './accounts.service';
import { CurrentCaller, NotRateLimited, RequiresFullAccess, type Caller } from '@atelier/auth';

/** DELETE /api/orgs/{org}/membership: a member leaves an org (its keys bound to the org are revoked). */
@Controller('api/orgs')
@RequiresFullAccess()
@NotRateLimited()
export class MembershipsController {
  constructor(private readonly accounts: AccountsService) {}

  @Delete(':org/membership')
  leave(@CurrentCaller() caller: Caller, @Param('org') org: string) {
    return this.accounts.removeMember(org, caller.username, true);
  }
}
