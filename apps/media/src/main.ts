import 'reflect-metadata';
import { loadConfigOrExit } from '@atelier/config';
import { runService } from '@atelier/runtime';
import { MediaModule } from './media.module';

const config = loadConfigOrExit();
void runService(MediaModule.forRoot(config), config, { service: 'media', port: config.MEDIA_PORT });
