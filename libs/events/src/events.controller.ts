import { Controller, Get, Headers, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { CurrentCaller, type Caller, RequiresScope } from '@atelier/auth';
import { EventStreamHub } from './event-stream-hub.service';

/** GET /api/events: the caller's completion events as Server-Sent Events. */
@Controller('api/events')
@RequiresScope('events')
export class EventsController {
  constructor(private readonly hub: EventStreamHub) {}

  @Get()
  async stream(@CurrentCaller() caller: Caller, @Headers('last-event-id') lastEventId: string | undefined, @Res() reply: FastifyReply): Promise<void> {
    // Refused before the hijack, so the 429 goes out through the usual envelope.
    await this.hub.admit(caller.keyPrefix);
    // From here on the raw socket is ours; Fastify must not try to send a reply.
    reply.hijack();
    this.hub.open(caller.userId, reply.raw, lastEventId, caller.keyPrefix);
  }
}
