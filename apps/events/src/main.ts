import 'reflect-metadata';
import { loadConfigOrExit } from '@atelier/config';
import { runService } from '@atelier/runtime';
import { EventsModule } from './events.module';

const config = loadConfigOrExit();
void runService(EventsModule.forRoot(config), config, { service: 'events', port: config.EVENTS_PORT });
