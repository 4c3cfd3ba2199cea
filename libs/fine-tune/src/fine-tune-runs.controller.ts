import { Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import { CountsAsWork, CurrentCaller, NamespaceAccess, RequiresScope, type Caller } from '@atelier/auth';
import { IDEMPOTENT } from '@atelier/idempotency';
import { RepositoriesService, type RepositoryRecord } from '@atelier/repos';
import { FineTuneReports } from './fine-tune-reports.service';
import { FineTuneRuns } from './fine-tune-runs.service';
import { FineTunesService, toFineTuneView } from './fine-tunes.service';

/** A fine-tune's run: run, stop, and what its trainer reported (logs, checkpoints, status). */
@Controller('api/repos/:namespace/:repo/fine_tunes/:id')
@RequiresScope('fine_tunes')
export class FineTuneRunsController {
  constructor(
    private readonly access: NamespaceAccess,
    private readonly repos: RepositoriesService,
    private readonly fineTunes: FineTunesService,
    private readonly runs: FineTuneRuns,
    private readonly reports: FineTuneReports,
  ) {}

  private async repo(caller: Caller, namespace: string, name: string): Promise<RepositoryRecord> {
    const scope = await this.access.resolve(caller, namespace);
    return this.repos.find(scope.id, scope.name, name);
  }

  @Post('actions/run')
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  async run(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Param('id') id: string) {
    const repo = await this.repo(caller, namespace, name);
    // The run bills the repository's namespace, with the caller's key (its budget) as the payer.
    const payer = { ...caller, namespaceId: repo.namespaceId, namespace: repo.namespace };
    const ft = await this.runs.run(repo, id, payer, () => this.fineTunes.startTokenization(repo, id, id));
    return { fine_tune: toFineTuneView(ft, repo), status: 'success', status_message: 'resource_updated' };
  }

  @Post('actions/stop')
  @CountsAsWork()
  @HttpCode(200)
  async stop(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Param('id') id: string) {
    const repo = await this.repo(caller, namespace, name);
    return { fine_tune: toFineTuneView(await this.runs.stop(repo, id), repo), status: 'success', status_message: 'resource_updated' };
  }

  @Get('logs')
  async logs(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Param('id') id: string, @Query() query: Record<string, unknown>) {
    return { ...(await this.reports.logs(await this.repo(caller, namespace, name), id, query)), status: 'success', status_message: 'resources_found' };
  }

  @Get('checkpoints')
  async checkpoints(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Param('id') id: string) {
    return { ...(await this.reports.checkpoints(await this.repo(caller, namespace, name), id)), status: 'success', status_message: 'resources_found' };
  }

  @Get('train_status')
  async trainStatus(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Param('id') id: string) {
    return { ...(await this.reports.trainStatus(await this.repo(caller, namespace, name), id)), status: 'success', status_message: 'resource_found' };
  }
}
