import { Controller, Get, Param, Query } from '@nestjs/common';
import { CurrentCaller, NamespaceAccess, RequiresScope, type Caller } from '@atelier/auth';
import { ApiError } from '@atelier/contracts';
import { listingQuery, type ListingQuery } from './fine-tune-listings';
import { toFineTuneView } from './fine-tunes.service';
import { FineTunesRepository } from './fine-tunes.repository';

/** Fine-tunes across the repositories of a namespace: the caller's own, or an org's it belongs to. */
@Controller('api')
@RequiresScope('fine_tunes')
export class FineTuneListingsController {
  constructor(
    private readonly access: NamespaceAccess,
    private readonly fineTunes: FineTunesRepository,
  ) {}

  @Get('user/fine_tunes')
  user(@CurrentCaller() caller: Caller, @Query() query: ListingQuery) {
    // The user's own namespace, whichever namespace the key bills to.
    return this.list(caller, caller.namespaceType === 'org' ? caller.username : caller.namespace, query);
  }

  @Get('orgs/:name/fine_tunes')
  async org(@CurrentCaller() caller: Caller, @Param('name') name: string, @Query() query: ListingQuery) {
    const scope = await this.access.resolve(caller, name);
    if (scope.type !== 'org') throw ApiError.notFound(`Organization not found: ${name}`);
    return this.list(caller, name, query);
  }

  private async list(caller: Caller, namespace: string, query: ListingQuery) {
    const scope = await this.access.resolve(caller, namespace);
    // A well-formed created_by only (listingQuery says what is wrong with any other).
    const username = typeof query.created_by === 'string' && query.created_by !== '' && !query.created_by.includes('\u0000') ? query.created_by : undefined;
    const creatorId = username ? await this.fineTunes.userId(username) : undefined;
    const { where, orderBy, skip, take, page, pageSize } = listingQuery(scope.id, query, () => creatorId);
    const [total, rows] = await this.fineTunes.listInNamespace({ where, orderBy, skip, take });
    return {
      fine_tunes: rows.map((r) => toFineTuneView(r, { namespace: scope.name, name: r.repository.name })),
      total,
      page,
      page_size: pageSize,
      status: 'success',
      status_message: 'resources_found',
    };
  }
}
