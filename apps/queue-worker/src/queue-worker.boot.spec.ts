import { createService } from '@atelier/runtime';
import { describeServiceBoot } from '@atelier/testing';
import { QueueWorkerModule } from './queue-worker.module';

describeServiceBoot('queue-worker', (config) => createService(QueueWorkerModule.forRoot(config), config, { service: 'queue-worker' }));
