import { Module, type DynamicModule } from '@nestjs/common';
import { AuthModule } from '@atelier/auth';
import type { AppConfig } from '@atelier/config';
import { EventsServiceModule } from '@atelier/events';
import { ServiceRuntimeModule } from '@atelier/runtime';
import { StorageModule } from '@atelier/storage';

/**
 * Server-Sent Events, scaled on its own: route GET /api/events here in front of the cluster
 * (the gateway serves the same stream for single-URL setups such as `npm start`).
 */
@Module({})
export class EventsModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: EventsModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'events', config, consumes: [] }), AuthModule, StorageModule, EventsServiceModule],
    };
  }
}
