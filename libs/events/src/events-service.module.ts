import { Module } from '@nestjs/common';
import { EventStreamHub } from './event-stream-hub.service';
import { EventsController } from './events.controller';

/** Serves GET /api/events; needs AuthModule and StorageModule in the importing app. */
@Module({ controllers: [EventsController], providers: [EventStreamHub], exports: [EventStreamHub] })
export class EventsServiceModule {}
