import { createService } from '@atelier/runtime';
import { describeServiceBoot } from '@atelier/testing';
import { EventsModule } from './events.module';

describeServiceBoot('events', (config) => createService(EventsModule.forRoot(config), config, { service: 'events' }));
