import { createService } from '@atelier/runtime';
import { describeServiceBoot } from '@atelier/testing';
import { ChatModule } from './chat.module';

describeServiceBoot('chat', (config) => createService(ChatModule.forRoot(config), config, { service: 'chat' }));
