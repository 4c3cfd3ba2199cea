import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { LoraAdapters } from '@atelier/models';
import { errorSummary, runPeriodically } from '@atelier/runtime';

/** In the chat service: at start-up and every LORA_RECONCILE_INTERVAL_MS, LoRA servers get back the deployed adapters they lost. */
@Injectable()
export class LoraReconciler implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(LoraReconciler.name);
  private periodic?: { stop(): Promise<void> };

  constructor(
    private readonly lora: LoraAdapters,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    const reconcile = async () => {
      const loaded = await this.lora.reconcile();
      if (loaded) this.logger.log(`Loaded ${loaded} LoRA adapter(s) their servers had lost`);
    };
    const failed = (err: unknown) => this.logger.warn(`Reconciling LoRA adapters failed: ${errorSummary(err)}`);
    void reconcile().catch(failed);
    this.periodic = runPeriodically(this.config.LORA_RECONCILE_INTERVAL_MS, reconcile, failed);
  }

  async onModuleDestroy(): Promise<void> {
    await this.periodic?.stop();
  }
}
