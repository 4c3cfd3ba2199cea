import { Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '@atelier/config';
import { ServiceRuntimeModule } from '@atelier/runtime';

/** Server-Sent Events: forwards completion broadcasts to subscribers. */
@Module({})
export class EventsModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: EventsModule,
      imports: [ServiceRuntimeModule.forRoot({ service: 'events', config, consumes: [] })],
    };
  }
}
