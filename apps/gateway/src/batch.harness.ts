import { Module, type DynamicModule } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { BatchServiceModule } from '@atelier/batch';
import type { AppConfig } from '@atelier/config';
import { QueueServiceModule } from '@atelier/queue';
import { createService } from '@atelier/runtime';
import type { ChatStack } from './chat.harness';

/** The queue-worker as apps/queue-worker composes it, running the batch pool only. */
@Module({})
class BatchWorkerModule {
  static forRoot(config: AppConfig): DynamicModule {
    return { module: BatchWorkerModule, imports: [QueueServiceModule.forRoot(config), BatchServiceModule.forRoot(config)] };
  }
}

/** A queue-worker running the batch pool in-process, on the chat stack's database and Redis prefix. */
export function startBatchWorker(stack: ChatStack): Promise<NestFastifyApplication> {
  const config = { ...stack.gw.env.config, QUEUE_WORKER_POOLS: ['batch'] } as AppConfig;
  return createService(BatchWorkerModule.forRoot(config), config, { service: 'queue-worker' });
}
