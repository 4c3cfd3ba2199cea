import 'reflect-metadata';
import { loadConfigOrExit } from '@atelier/config';
import { runService } from '@atelier/runtime';
import { ChatModule } from './chat.module';

const config = loadConfigOrExit();
void runService(ChatModule.forRoot(config), config, { service: 'chat', port: config.CHAT_PORT });
