import { Controller, Get, Query } from '@nestjs/common';
import { CurrentCaller, NamespaceAccess, type Caller } from '@atelier/auth';
import { BatchedCreditLedger } from './batched-credit-ledger.service';

/** Lets a caller check what a namespace they belong to can still spend. */
@Controller('api/credits')
export class CreditsController {
  constructor(
    private readonly access: NamespaceAccess,
    private readonly ledger: BatchedCreditLedger,
  ) {}

  @Get()
  async get(@CurrentCaller() caller: Caller, @Query('namespace') namespace?: unknown) {
    const scope = await this.access.resolve(caller, namespace);
    const balance = await this.ledger.balance(scope.id);
    return { namespace: scope.name, type: scope.type, ...balance };
  }
}
