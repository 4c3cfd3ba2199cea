import { createService } from '@atelier/runtime';
import { describeServiceBoot } from '@atelier/testing';
import { FineTuneModule } from './fine-tune.module';

describeServiceBoot('fine-tune', (config) => createService(FineTuneModule.forRoot(config), config, { service: 'fine-tune' }));
