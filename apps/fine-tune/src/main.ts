import 'reflect-metadata';
import { loadConfigOrExit } from '@atelier/config';
import { runService } from '@atelier/runtime';
import { FineTuneModule } from './fine-tune.module';

const config = loadConfigOrExit();
void runService(FineTuneModule.forRoot(config), config, { service: 'fine-tune', port: config.FINE_TUNE_PORT });
