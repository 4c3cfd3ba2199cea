export { EventStreamHub, eventPayload } from './event-stream-hub.service';
export { EventsServiceModule } from './events-service.module';
