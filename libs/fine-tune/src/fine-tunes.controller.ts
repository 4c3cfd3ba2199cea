import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { CountsAsWork, CurrentCaller, NamespaceAccess, type Caller, RequiresScope } from '@atelier/auth';
import { FineTunesService } from './fine-tunes.service';
import { RepositoriesService, type RepositoryRecord } from '@atelier/repos';
import { RouteConfig } from '@nestjs/platform-fastify';
import { IDEMPOTENT } from '@atelier/idempotency';

/** Fine-tunes of a repository: create (validated against the dataset), read, list, delete, tokenize. */
@Controller('api/repos/:namespace/:repo/fine_tunes')
@RequiresScope('fine_tunes')
export class FineTunesController {
  constructor(
    private readonly access: NamespaceAccess,
    private readonly repos: RepositoriesService,
    private readonly fineTunes: FineTunesService,
  ) {}

  private async repo(caller: Caller, namespace: string, name: string): Promise<RepositoryRecord> {
    const scope = await this.access.resolve(caller, namespace);
    return this.repos.find(scope.id, scope.name, name);
  }

  @Post()
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(201)
  async create(
    @CurrentCaller() caller: Caller,
    @Param('namespace') namespace: string,
    @Param('repo') name: string,
    @Body() body: unknown,
    @Req() req: FastifyRequest,
  ) {
    const repo = await this.repo(caller, namespace, name);
    return { fine_tune: await this.fineTunes.create(repo, caller.userId, body, String(req.id)), status: 'success', status_message: 'resource_created' };
  }

  @Get()
  async list(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Query() query: Record<string, unknown>) {
    const scope = await this.access.resolve(caller, namespace);
    return { ...(await this.fineTunes.list(scope, name, query)), status: 'success', status_message: 'resources_found' };
  }

  @Get(':id')
  async get(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Param('id') id: string) {
    // What clients poll: one read, without the repository's own.
    const scope = await this.access.resolve(caller, namespace);
    return { fine_tune: await this.fineTunes.get(scope, name, id), status: 'success', status_message: 'resource_found' };
  }

  @Delete(':id')
  async delete(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Param('id') id: string) {
    const repo = await this.repo(caller, namespace, name);
    return { fine_tune: await this.fineTunes.delete(repo, id), status: 'success', status_message: 'resource_deleted' };
  }

  @Post(':id/tokenize')
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  async tokenize(
    @CurrentCaller() caller: Caller,
    @Param('namespace') namespace: string,
    @Param('repo') name: string,
    @Param('id') id: string,
    @Req() req: FastifyRequest,
  ) {
    const repo = await this.repo(caller, namespace, name);
    return { fine_tune: await this.fineTunes.startTokenization(repo, id, String(req.id)), status: 'success', status_message: 'resource_updated' };
  }
}
