import { Controller, Get, Param, Query } from '@nestjs/common';
import { CurrentCaller, NamespaceAccess, RequiresScope, type Caller } from '@atelier/auth';
import { ApiError } from '@atelier/contracts';
import { PrismaService } from '@atelier/db';
import { listingQuery, type ListingQuery } from './fine-tune-listings';
import { toFineTuneView } from './fine-tunes.service';

/** Fine-tunes across the repositories of a namespace: the caller's own, or an org's it belongs to. */
@Controller('api')
@RequiresScope('fine_tunes')
export class FineTuneListingsController {
  constructor(
    private readonly access: NamespaceAccess,
    private readonly prisma: PrismaService,
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
    const creator = username ? await this.prisma.user.findUnique({ where: { username }, select: { id: true } }) : null;
    const { where, orderBy, skip, take, page, pageSize } = listingQuery(scope.id, query, () => creator?.id);
    const [total, rows] = await Promise.all([
      this.prisma.fineTune.count({ where }),
      this.prisma.fineTune.findMany({ where, orderBy, skip, take, include: { repository: { select: { name: true } } } }),
    ]);
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
