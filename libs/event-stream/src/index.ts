export { EventStreamHub, eventPayload } from './event-stream-hub.service';
export { EventStreamModule } from './event-stream.module';
