import 'reflect-metadata';
import { loadConfigOrExit } from '@atelier/config';
import { runService } from '@atelier/runtime';
import { QueueWorkerModule } from './queue-worker.module';

const config = loadConfigOrExit();
void runService(QueueWorkerModule.forRoot(config), config, { service: 'queue-worker', port: config.QUEUE_WORKER_PORT });
