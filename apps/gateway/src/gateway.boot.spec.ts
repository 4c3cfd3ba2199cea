import { createService } from '@atelier/runtime';
import { describeServiceBoot } from '@atelier/testing';
import { GatewayModule } from './gateway.module';

describeServiceBoot('gateway', (config) => createService(GatewayModule.forRoot(config), config, { service: 'gateway' }));
