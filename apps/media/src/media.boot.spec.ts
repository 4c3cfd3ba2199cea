import { createService } from '@atelier/runtime';
import { describeServiceBoot } from '@atelier/testing';
import { MediaModule } from './media.module';

describeServiceBoot('media', (config) => createService(MediaModule.forRoot(config), config, { service: 'media' }));
