import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ClusterSweeps, errorSummary } from '@atelier/runtime';
import { BlobStore } from '@atelier/storage';
import { FilesRepository } from './files.repository';

/** Most expired files one sweep deletes; the next sweep takes the rest. */
const SWEEP_BATCH = 500;

/**
 * Deletes expired files on every gateway, every FILES_SWEEP_INTERVAL_MS: the records first (an
 * expired file already answers 404), then their bytes. A crash between the two leaves bytes no
 * record names, never a record without its bytes.
 */
@Injectable()
export class FilesSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(FilesSweeper.name);
  private periodic?: { stop(): Promise<void> };

  constructor(
    private readonly sweeps: ClusterSweeps,
    private readonly files: FilesRepository,
    private readonly blobs: BlobStore,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'FILES_SWEEP_INTERVAL_MS'>,
  ) {}

  onApplicationBootstrap(): void {
    this.periodic = this.sweeps.every('expired-files', this.config.FILES_SWEEP_INTERVAL_MS, () => this.sweep(), (err) => this.logger.warn(`Sweeping expired files failed: ${errorSummary(err)}`));
  }

  /** One sweep; how many files it deleted. */
  async sweep(now = new Date()): Promise<number> {
    const keys = await this.files.deleteExpired(SWEEP_BATCH, now);
    for (const key of keys) await this.blobs.delete(key).catch((err: unknown) => this.logger.warn(`Deleting expired bytes ${key} failed: ${errorSummary(err)}`));
    return keys.length;
  }

  async onModuleDestroy(): Promise<void> {
    await this.periodic?.stop();
  }
}
