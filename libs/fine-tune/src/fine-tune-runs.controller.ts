import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import { CountsAsWork, CurrentCaller, NamespaceAccess, RequiresScope, type Caller } from '@atelier/auth';
import { IDEMPOTENT } from '@atelier/idempotency';
import { RepositoriesService, type RepositoryRecord } from '@atelier/repos';
import { FineTuneDeployments } from './fine-tune-deployments.service';
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
    private readonly deployments: FineTuneDeployments,
  ) {}

  private async repo(caller: Caller, namespace: string, name: string): Promise<RepositoryRecord> {
    const scope = await this.access.resolve(caller, namespace);
    return this.repos.find(scope.id, scope.name, name);
  }

  @Post('actions/run')
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  async run(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Param('id') id: string, @Body() body: unknown) {
    const repo = await this.repo(caller, namespace, name);
    // The run bills the repository's namespace, with the caller's key (its budget) as the payer.
    const payer = { ...caller, namespaceId: repo.namespaceId, namespace: repo.namespace };
    const ft = await this.runs.run(repo, id, payer, () => this.fineTunes.startTokenization(repo, id, id), body);
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

  @Post('checkpoints/:step/deploy')
  @CountsAsWork()
  @RouteConfig(IDEMPOTENT)
  @HttpCode(200)
  async deploy(
    @CurrentCaller() caller: Caller,
    @Param('namespace') namespace: string,
    @Param('repo') name: string,
    @Param('id') id: string,
    @Param('step') step: string,
    @Body() body: unknown,
    @Query('retry') retry: unknown,
  ) {
    const repo = await this.repo(caller, namespace, name);
    const deployed = await this.deployments.deploy(repo, id, step, body, retry === 'true');
    return { fine_tune: toFineTuneView(deployed.fine_tune, repo), model: deployed.model, status: 'success', status_message: 'resource_created' };
  }

  @Get('train_status')
  async trainStatus(@CurrentCaller() caller: Caller, @Param('namespace') namespace: string, @Param('repo') name: string, @Param('id') id: string) {
    return { ...(await this.reports.trainStatus(await this.repo(caller, namespace, name), id)), status: 'success', status_message: 'resource_found' };
  }
}
