import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import path from 'node:path';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, secretFromEnv, type AppConfig } from '@atelier/config';
import { ApiError } from '@atelier/contracts';
import { DeploymentsRepository } from './deployments.repository';
import { BlobStore } from '@atelier/storage';
import { DeployedModels } from './deployed-models.service';
import { deploymentOfAdapter, loraAdapterName } from './lora-adapter-name';
import type { ModelDefinition, OpenAiCompatibleEngineConfig } from './model-types';

/** A load is a file read on the server; far shorter than a chat's timeout. */
const LOAD_TIMEOUT_MS = 60_000;


/**
 * Deployed checkpoints of base models served by a LoRA server (a catalog model whose
 * openai-compatible engine declares lora_base_model): the checkpoint's files are written under
 * LORA_ADAPTER_DIR/atelier-<deployment id>/, which the server mounts, and loaded there under that
 * name (vLLM's `POST {base_url}/load_lora_adapter {"lora_name", "lora_path"}`). Public model names
 * are unique only within a namespace, so they name nothing on the server. A server that restarted
 * has lost its adapters: the chat service loads one again when the server answers 404 for it, and
 * reconciles every deployed adapter at start-up and periodically.
 */
@Injectable()
export class LoraAdapters {
  private readonly logger = new Logger(LoraAdapters.name);

  constructor(
    private readonly deploymentRows: DeploymentsRepository,
    private readonly blobs: BlobStore,
    private readonly deployed: DeployedModels,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  private directory(name: string): string {
    return path.resolve(this.config.LORA_ADAPTER_DIR, name);
  }

  /** Writes the checkpoint's files where the server reads them, then loads them under the deployment's adapter name. */
  async deploy(serving: ModelDefinition, deploymentId: string, fineTuneId: string, step: number): Promise<void> {
    const name = loraAdapterName(deploymentId);
    await this.writeFiles(name, fineTuneId, step);
    await this.load(serving, name);
  }

  private async writeFiles(name: string, fineTuneId: string, step: number): Promise<void> {
    const files = await this.deploymentRows.checkpointFiles(fineTuneId, step);
    if (files.length === 0) throw new ApiError('resource_not_found', `Checkpoint ${step} of fine-tune ${fineTuneId} has no files`);
    for (const file of files) {
      const blob = await this.blobs.get(file.blobKey);
      if (!blob) throw new ApiError('service_unavailable', `The checkpoint file ${file.path} is missing from storage`);
      const target = path.join(this.directory(name), file.path);
      await mkdir(path.dirname(target), { recursive: true });
      // Streamed: an adapter's weights may be as large as MAX_CHECKPOINT_BYTES.
      await pipeline(blob.body, createWriteStream(target));
    }
  }

  /** Asks the serving model's server to load the adapter; one already loaded under this deployment's own name counts as loaded. */
  async load(serving: ModelDefinition, name: string): Promise<void> {
    const engine = serving.engine as OpenAiCompatibleEngineConfig;
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    const key = engine.api_key_env ? secretFromEnv(engine.api_key_env) : undefined;
    if (key) headers.authorization = `Bearer ${key}`;
    let res: Response;
    try {
      res = await fetch(`${engine.base_url.replace(/\/+$/, '')}/load_lora_adapter`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ lora_name: name, lora_path: this.directory(name) }),
        signal: AbortSignal.timeout(LOAD_TIMEOUT_MS),
      });
    } catch (err) {
      throw new ApiError('upstream_error', `The LoRA server of ${serving.id} could not be reached to load ${name}: ${(err as Error).message}`);
    }
    const text = await res.text();
    if (res.ok || /already (been )?loaded/i.test(text)) return;
    throw new ApiError('upstream_error', `The LoRA server of ${serving.id} refused to load ${name} (HTTP ${res.status}): ${text.slice(0, 300)}`);
  }

  /** Loads a deployed adapter again by its adapter name (its server lost it), writing its files first if they are gone. */
  async reload(serving: ModelDefinition, name: string): Promise<void> {
    const id = deploymentOfAdapter(name);
    const row = id ? await this.deploymentRows.deployedById(id) : null;
    if (!row) throw new ApiError('resource_not_found', `Model not found: ${name}`);
    await this.writeFiles(name, row.fineTuneId, row.step);
    await this.load(serving, name);
    this.logger.log(`Loaded ${name} into the LoRA server of ${serving.id} again`);
  }

  /** Every deployed adapter its server does not list (GET {base_url}/models) is loaded again. Returns how many. */
  async reconcile(): Promise<number> {
    const rows = await this.deploymentRows.allDeployed();
    const listed = new Map<string, Set<string> | undefined>();
    let loaded = 0;
    for (const row of rows) {
      const serving = this.deployed.servingModel(row.baseModel);
      if (!serving || serving.engine.type !== 'openai-compatible') continue;
      const engine = serving.engine as OpenAiCompatibleEngineConfig;
      const base = engine.base_url.replace(/\/+$/, '');
      if (!listed.has(base)) listed.set(base, await this.models(base, engine.api_key_env));
      const ids = listed.get(base);
      const name = loraAdapterName(row.id);
      if (!ids || ids.has(name)) continue;
      try {
        await this.reload(serving, name);
        loaded++;
      } catch (err) {
        this.logger.warn(`Reconciling ${row.name} (${name}): ${(err as Error).message}`);
      }
    }
    return loaded;
  }

  private async models(base: string, apiKeyEnv?: string): Promise<Set<string> | undefined> {
    const key = apiKeyEnv ? secretFromEnv(apiKeyEnv) : undefined;
    try {
      const res = await fetch(`${base}/models`, { headers: key ? { authorization: `Bearer ${key}` } : {}, signal: AbortSignal.timeout(10_000) });
      if (!res.ok) return undefined;
      const body = (await res.json()) as { data?: { id?: unknown }[] };
      return new Set((body.data ?? []).map((m) => String(m.id)));
    } catch {
      return undefined;
    }
  }
}
