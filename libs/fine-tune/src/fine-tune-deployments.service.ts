import { Injectable } from '@nestjs/common';
import { ApiError } from '@atelier/contracts';
import { DeployedModels, deployedModelObject, LoraAdapters } from '@atelier/models';
import type { RepositoryRecord } from '@atelier/repos';
import { checkpointModelName } from './fine-tune-reports.service';
import { FineTuneRuns } from './fine-tune-runs.service';
import { FineTunesRepository } from './fine-tunes.repository';

export const DEPLOYMENT_TYPES = ['fast', 'normal'] as const;
/** A checkpoint can become a model once its run has ended. */
const DEPLOYABLE_STATES = ['completed', 'stopped', 'deployed'];


/**
 * POST .../checkpoints/{step}/deploy: a sealed checkpoint becomes the model
 * `<fine_tune_name>-step-<step>`, owned by the fine-tune's namespace and callable through the
 * endpoint of its serving model. atelier/local-chat checkpoints are served by local-chat with
 * their counts; other base models by a LoRA server (LoraServers), which loads the adapter first.
 */
@Injectable()
export class FineTuneDeployments {
  constructor(
    private readonly fineTunes: FineTunesRepository,
    private readonly runs: FineTuneRuns,
    private readonly deployed: DeployedModels,
    private readonly lora: LoraAdapters,
  ) {}

  async deploy(repo: RepositoryRecord, id: string, stepParam: string, body: unknown, retry: boolean) {
    const ft = await this.runs.find(repo, id);
    if (!/^\d{1,9}$/.test(stepParam)) throw ApiError.badRequest('step must be a non-negative integer');
    const step = Number(stepParam);
    const type = body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>).deployment_type ?? 'normal' : 'normal';
    if (typeof type !== 'string' || !(DEPLOYMENT_TYPES as readonly string[]).includes(type)) throw ApiError.badRequest(`deployment_type must be one of ${DEPLOYMENT_TYPES.join(', ')}`);
    if (!DEPLOYABLE_STATES.includes(ft.state))
      throw new ApiError('invalid_state', `Fine-tune ${id} is in state '${ft.state}'; its checkpoints can be deployed once the run has ended (completed or stopped)`);
    const checkpoint = await this.fineTunes.checkpoint(ft.id, step);
    if (!checkpoint) throw ApiError.notFound(`Checkpoint not found: step ${step} of fine-tune ${id}`);
    const serving = this.deployed.servingModel(ft.baseModel);
    if (!serving)
      throw new ApiError(
        'invalid_state',
        `Nothing can serve fine-tunes of ${ft.baseModel}: the catalog has no model with "lora_base_model": "${ft.baseModel}" (an openai-compatible server that loads LoRA adapters at run time)`,
      );
    const name = checkpointModelName(ft.name, step);
    const existing = await this.fineTunes.deployedModel(ft.id, step);
    if (existing?.status === 'deployed' && !retry) throw ApiError.conflict(`Checkpoint ${step} is already deployed as ${name}; ?retry=true deploys it again`);
    // The row first, so a name taken in this namespace is refused before any file is written; its
    // id then names the adapter on disk and on the LoRA server, unique across namespaces.
    const row = await this.fineTunes.upsertDeployedModel({ namespaceId: ft.namespaceId, name, fineTuneId: ft.id, step, baseModel: ft.baseModel, deploymentType: type });
    if (!row) throw ApiError.conflict(`A model named ${name} already exists in namespace ${repo.namespace}`);
    let status = 'deployed';
    let failure: unknown;
    if (serving.engine.type === 'openai-compatible') {
      try {
        await this.lora.deploy(serving, row.id, ft.id, step);
      } catch (err) {
        status = 'failed';
        failure = err;
      }
    }
    // A retry that failed keeps an adapter that was serving: only a first deploy records the failure.
    if (status === 'deployed' || existing?.status !== 'deployed') await this.fineTunes.setDeployedModelStatus(row.id, status);
    this.deployed.forget();
    if (failure) throw failure;
    const moved = (await this.runs.transition(ft.id, ['completed', 'stopped', 'deployed'], 'deployed')) ?? (await this.runs.find(repo, id));
    const view = await this.deployed.inNamespace(ft.namespaceId, name);
    if (!view) throw new ApiError('service_unavailable', `${name} was deployed but cannot be served now; try again`);
    return { fine_tune: moved, model: deployedModelObject(view) };
  }
}
