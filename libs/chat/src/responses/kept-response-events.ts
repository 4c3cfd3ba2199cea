import { Injectable } from '@nestjs/common';
import { RedisService } from '@atelier/runtime';

/** How long a background response's events are kept after its last one (a client resumes within it). */
const KEEP_SECONDS = 24 * 3600;
/** The most events kept per response: a longer stream keeps its newest. */
const MAX_EVENTS = 100_000;
/** What a stream's end looks like: the events after which nothing follows. */
export const TERMINAL_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled']);

export interface KeptEvent {
  type: string;
  sequence_number: number;
  [field: string]: unknown;
}

/**
 * The events of a streamed background response, kept in a Redis stream while it runs and a day
 * after, so `GET /api/ai/responses/{id}?stream=true&starting_after=<n>` resumes a dropped stream
 * where it left off, on any gateway.
 */
@Injectable()
export class KeptResponseEvents {
  constructor(private readonly redis: RedisService) {}

  private key(id: string): string {
    return this.redis.names.key('response-events', id);
  }

  async append(id: string, event: KeptEvent): Promise<void> {
    await this.redis.client
      .multi()
      .xadd(this.key(id), 'MAXLEN', '~', String(MAX_EVENTS), '*', 'e', JSON.stringify(event))
      .expire(this.key(id), KEEP_SECONDS)
      .exec();
  }

  /** The kept events numbered after `after`, in order, read from the stream position `from` on (the next read's `from` comes back with them). */
  async read(id: string, after: number, from = '-'): Promise<{ events: KeptEvent[]; next: string }> {
    const entries = await this.redis.client.xrange(this.key(id), from, '+', 'COUNT', 500);
    const events: KeptEvent[] = [];
    let next = from;
    for (const [entryId, fields] of entries) {
      next = `(${entryId}`;
      const event = JSON.parse(fields[1]) as KeptEvent;
      if (event.sequence_number > after) events.push(event);
    }
    return { events, next };
  }

  /** The highest sequence number kept, or -1. */
  async last(id: string): Promise<number> {
    const [entry] = await this.redis.client.xrevrange(this.key(id), '+', '-', 'COUNT', 1);
    return entry ? (JSON.parse(entry[1][1]) as KeptEvent).sequence_number : -1;
  }
}
