import 'reflect-metadata';
import { loadConfigOrExit } from '@atelier/config';
import { runService } from '@atelier/runtime';
import { GatewayModule } from './gateway.module';

const config = loadConfigOrExit();
void runService(GatewayModule.forRoot(config), config, { service: 'gateway', port: config.PORT });
