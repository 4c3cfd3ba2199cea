import { Inject, Injectable } from '@nestjs/common';
import { NamespacesRepository, type Caller } from '@atelier/auth';
import type { ChatModelAdapter, MediaModelAdapter } from '@atelier/contracts';
import { DeploymentsRepository } from './deployments.repository';
import { ModelCatalog } from './model-catalog';
import type { ModelDefinition } from './model-types';
import { toPublicModel } from './public-model';
import { loraAdapterName } from './lora-adapter-name';

/** The built-in base model of fine-tunes, and the catalog model that serves it (with the checkpoint's counts). */
export const LOCAL_CHAT_BASE_MODEL = 'atelier/local-chat';
const LOCAL_CHAT_MODEL = 'local-chat';
/** ... and of the image one, served by local-image with the checkpoint's learned style. */
export const LOCAL_IMAGE_BASE_MODEL = 'atelier/local-image';
const LOCAL_IMAGE_MODEL = 'local-image';

/** What a deployed model adds to its serving model: the built-in engine's counts, or a LoRA adapter loaded into its server. */
export type ModelAdapter = ChatModelAdapter | MediaModelAdapter;

export interface DeployedModelView {
  /** The deployed name: `<fine_tune_name>-step-<step>`. */
  name: string;
  namespaceId: string;
  namespace: string;
  baseModel: string;
  fineTuneId: string;
  step: number;
  /** The catalog model that serves it (its engine, parameters and pricing). */
  serving: ModelDefinition;
  adapter: ModelAdapter;
  createdAt: Date;
}

const MAX_NAME_LENGTH = 512;
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

/** Looked-up deployed models are trusted this long; a deploy clears this replica's entries at once. */
const CACHE_MS = 2_000;

/**
 * Deployed fine-tune checkpoints as models: each is owned by its namespace and visible only to
 * it and its members. It is served by a catalog model: local-chat for atelier/local-chat (with
 * the checkpoint's n-gram counts), or the model that declares `lora_base_model` for its base
 * model (a LoRA server that loads the adapter under the model's name). Only looked up when a
 * name is not in the catalog, so catalog models cost nothing more.
 */
@Injectable()
export class DeployedModels {
  private readonly byName = new Map<string, { rows: DeployedModelView[]; at: number }>();
  /** What each caller (user and default namespace) may call, for the model listing. */
  private readonly byCaller = new Map<string, { rows: DeployedModelView[]; at: number }>();

  constructor(
    private readonly deployments: DeploymentsRepository,
    private readonly namespaces: NamespacesRepository,
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
  ) {}

  /** The catalog model that can serve fine-tunes of `baseModel`, if any. */
  servingModel(baseModel: string): ModelDefinition | undefined {
    if (baseModel === LOCAL_CHAT_BASE_MODEL) return this.catalog.get(LOCAL_CHAT_MODEL);
    if (baseModel === LOCAL_IMAGE_BASE_MODEL) return this.catalog.get(LOCAL_IMAGE_MODEL);
    return this.catalog.list({}).find((m) => m.engine.type === 'openai-compatible' && (m.engine as { lora_base_model?: string }).lora_base_model === baseModel);
  }

  forget(): void {
    this.byName.clear();
    this.byCaller.clear();
  }

  private async named(name: string): Promise<DeployedModelView[]> {
    // No deployed model has such a name, and Postgres refuses a NUL in text: not a lookup at all.
    if (name.length > MAX_NAME_LENGTH || CONTROL_CHARACTERS.test(name)) return [];
    const hit = this.byName.get(name);
    if (hit && performance.now() - hit.at < CACHE_MS) return hit.rows;
    const rows = await this.deployments.deployedNamed(name);
    const views = (await Promise.all(rows.map((r) => this.view(r)))).filter((v): v is DeployedModelView => v !== undefined);
    if (this.byName.size > 10_000) this.byName.clear();
    this.byName.set(name, { rows: views, at: performance.now() });
    return views;
  }

  private async view(row: { id: string; name: string; namespaceId: string; baseModel: string; fineTuneId: string; step: number; createdAt: Date }): Promise<DeployedModelView | undefined> {
    const serving = this.servingModel(row.baseModel);
    if (!serving) return undefined;
    const namespace = await this.namespaces.name(row.namespaceId);
    let adapter: ModelAdapter;
    if (row.baseModel === LOCAL_CHAT_BASE_MODEL || row.baseModel === LOCAL_IMAGE_BASE_MODEL) {
      const file = await this.deployments.checkpointFile(row.fineTuneId, row.step, 'adapter_model.json');
      if (!file) return undefined;
      adapter = { kind: row.baseModel === LOCAL_CHAT_BASE_MODEL ? 'ngram' : 'style', key: file.blobKey };
    } else adapter = { kind: 'lora', name: loraAdapterName(row.id) };
    return { ...row, namespace: namespace ?? '', serving, adapter };
  }

  /**
   * The deployed model of this name the caller may call: of the namespace it acts on first, then
   * of any other it belongs to; undefined when there is none.
   */
  async resolve(caller: Caller, name: string, canAccess: (namespaceId: string) => Promise<boolean>): Promise<DeployedModelView | undefined> {
    const rows = await this.named(name);
    if (rows.length === 0) return undefined;
    const own = rows.find((r) => r.namespaceId === caller.namespaceId);
    if (own) return own;
    for (const r of rows) if (await canAccess(r.namespaceId)) return r;
    return undefined;
  }

  /**
   * A deployed model by name for work already authorized (a queued generation): only the one of
   * the namespace the work bills to. Another namespace's model of that name is never a fallback.
   */
  async forWork(name: string, namespaceId: string): Promise<DeployedModelView | undefined> {
    const rows = await this.named(name);
    return rows.find((r) => r.namespaceId === namespaceId);
  }

  /** The namespace's deployed model of this name, read now (after a deploy). */
  async inNamespace(namespaceId: string, name: string): Promise<DeployedModelView | undefined> {
    const row = await this.deployments.inNamespace(namespaceId, name);
    return row && row.status === 'deployed' ? this.view(row) : undefined;
  }

  /** Every deployed model the caller may call (its namespace's, and its orgs'). */
  async visibleTo(caller: Caller): Promise<DeployedModelView[]> {
    const key = `${caller.userId} ${caller.namespaceId}`;
    const hit = this.byCaller.get(key);
    if (hit && performance.now() - hit.at < CACHE_MS) return hit.rows;
    const views = await this.readVisible(caller);
    if (this.byCaller.size > 10_000) this.byCaller.clear();
    this.byCaller.set(key, { rows: views, at: performance.now() });
    return views;
  }

  private async readVisible(caller: Caller): Promise<DeployedModelView[]> {
    const rows = await this.deployments.visibleTo(caller.userId, caller.namespaceId);
    return (await Promise.all(rows.map((r) => this.view(r)))).filter((v): v is DeployedModelView => v !== undefined);
  }
}

/** The model definition a deployed model is served and priced as: its serving model's, under its own name. */
export function deployedDefinition(view: DeployedModelView): ModelDefinition {
  return { ...view.serving, id: view.name, owned_by: view.namespace } as ModelDefinition;
}

/** The public model object of a deployed checkpoint: its serving model's, under its own name, and where it came from. */
export function deployedModelObject(view: DeployedModelView) {
  return { ...toPublicModel(deployedDefinition(view)), base_model: view.baseModel, fine_tune_id: view.fineTuneId, step: view.step };
}
