import { Body, Controller, Get, HttpCode, Inject, Param, Post, Put, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CurrentCaller, NamespaceAccess, type Caller, RequiresScope } from '@atelier/auth';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError, CreateBranchRequest, CreateRepositoryRequest } from '@atelier/contracts';
import { RepositoriesService } from './repositories.service';
import { DEFAULT_BRANCH } from './repository-names';
import type { RepositoryRecord } from './repository-types';
import { multipartUploadItems, parseBody } from '@atelier/runtime';

type WildcardRequest = FastifyRequest<{ Params: { '*': string } }>;

/** `<branch>/<rest...>` from the route's wildcard. */
function branchAndRest(wildcard: string | undefined): { branch: string; rest: string } {
  const [branch = '', ...rest] = (wildcard ?? '').split('/');
  if (!branch) throw ApiError.badRequest('The path must start with a branch name, e.g. /file/main/data/train.parquet');
  return { branch, rest: rest.join('/') };
}

/** Repositories: create, describe, branches, upload and download files. Members of the namespace only. */
@Controller('api/repos')
@RequiresScope('repos')
export class ReposController {
  constructor(
    private readonly access: NamespaceAccess,
    private readonly repos: RepositoriesService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  private async repo(caller: Caller, namespace: string, name: string): Promise<RepositoryRecord> {
    const scope = await this.access.resolve(caller, namespace);
    return this.repos.find(scope.id, scope.name, name);
  }

  @Post()
  @HttpCode(201)
  async create(@CurrentCaller() caller: Caller, @Body() body: unknown) {
    const req = parseBody(CreateRepositoryRequest, body);
    const scope = await this.access.resolve(caller, req.namespace);
    const repository = await this.repos.create({ namespaceId: scope.id, namespace: scope.name, userId: caller.userId }, req.name, req.description);
    return { repository, status: 'success', status_message: 'resource_created' };
  }

  @Get(':namespace/:repo')
  async describe(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Query('branch') branch?: unknown) {
    if (branch !== undefined && typeof branch !== 'string') throw ApiError.badRequest('branch must be given once');
    const repo = await this.repo(caller, namespace, name);
    return { repository: await this.repos.describe(repo, branch || DEFAULT_BRANCH) };
  }

  @Get(':namespace/:repo/branches')
  async branches(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string) {
    const repo = await this.repo(caller, namespace, name);
    return { branches: await this.repos.listBranches(repo) };
  }

  @Post(':namespace/:repo/branches')
  @HttpCode(201)
  async createBranch(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Body() body: unknown) {
    const req = parseBody(CreateBranchRequest, body);
    const repo = await this.repo(caller, namespace, name);
    return { branch: await this.repos.createBranch(repo, req.name, req.from), status: 'success', status_message: 'resource_created' };
  }

  /** Multipart upload into `<branch>/<directory...>`; each part's filename is its name in that directory. */
  @Put(':namespace/:repo/file/*')
  @HttpCode(201)
  async upload(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Req() req: WildcardRequest) {
    const { branch, rest } = branchAndRest(req.params['*']);
    const repo = await this.repo(caller, namespace, name);
    const commit = await this.repos.upload(repo, branch, rest, multipartUploadItems(req, this.config), { userId: caller.userId, username: caller.username });
    return { commit, status: 'success', status_message: 'resource_created' };
  }

  @Get(':namespace/:repo/file/*')
  async download(
    @CurrentCaller() caller: Caller,
    @Param('namespace') namespace: string,
    @Param('repo') name: string,
    @Req() req: WildcardRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const { branch, rest } = branchAndRest(req.params['*']);
    const repo = await this.repo(caller, namespace, name);
    const { file, blob } = await this.repos.download(repo, branch, rest);
    const basename = file.path.split('/').pop() ?? 'file';
    await reply
      .header('content-type', file.content_type)
      .header('content-length', String(blob.size))
      .header('etag', `"${file.sha256}"`)
      .header('content-disposition', `attachment; filename*=UTF-8''${encodeURIComponent(basename)}`)
      .send(blob.body);
  }
}
