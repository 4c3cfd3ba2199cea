import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { loadLuaScript, luaCommand, RUNTIME_LUA } from './lua-script';
import { RedisService } from './redis.module';

const APPEND = loadLuaScript(RUNTIME_LUA, 'user-events-append-2.lua');

/** At most this many events are kept per user (beside the time bound, EVENTS_REPLAY_SECONDS). */
export const USER_EVENTS_KEPT = 1000;

/** Stream entry ids (`<ms>-<seq>`) in order: negative when a is older than b. */
export function compareEventIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt);
  const [bm, bs] = b.split('-').map(BigInt);
  return am !== bm ? (am < bm ? -1 : 1) : as === bs ? 0 : as < bs ? -1 : 1;
}

export const EVENT_ID_PATTERN = /^\d{1,20}-\d{1,20}$/;

export interface RetainedEvent<T> {
  id: string;
  payload: T;
}

/**
 * Each user's recent events on a Redis stream, shared by every events replica: the stream entry
 * id is the event's SSE `id:` (increasing per user), and an event stream that resumes with
 * Last-Event-ID is sent what it missed from here. Kept for EVENTS_REPLAY_SECONDS and at most
 * USER_EVENTS_KEPT events per user; an idle user's stream expires with its last event.
 */
@Injectable()
export class UserEventLog {
  constructor(
    private readonly redis: RedisService,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'EVENTS_REPLAY_SECONDS'>,
  ) {}

  /**
   * Appends an event once and trims what is past the retention; returns the event's id. `once`
   * names the event (a generation's id, an outbox row's): appended again, by the outbox sweeper or
   * by a first attempt that stalled past the sweeper and then went on, it keeps the id its first
   * append got, so a replay never shows it twice.
   */
  async append(userId: string, payload: unknown, once: string): Promise<string> {
    const retention = this.config.EVENTS_REPLAY_SECONDS;
    return luaCommand<string>(this.redis.client, APPEND)(
      this.redis.names.userEvents(userId),
      this.redis.names.userEventOnce(userId, once),
      USER_EVENTS_KEPT,
      Date.now() - retention * 1000,
      Math.max(1, retention),
      JSON.stringify(payload),
    );
  }

  async after<T>(userId: string, afterId: string): Promise<{ events: RetainedEvent<T>[]; incomplete: boolean }> {
    const key = this.redis.names.userEvents(userId);
    // From the id itself: whether it is still retained comes with the events after it.
    const entries = (await this.redis.client.xrange(key, afterId, '+', 'COUNT', USER_EVENTS_KEPT + 1)) as [string, string[]][];
    const stillThere = entries[0]?.[0] === afterId;
    const events: RetainedEvent<T>[] = [];
    for (const [id, fields] of stillThere ? entries.slice(1) : entries.slice(0, USER_EVENTS_KEPT)) {
      const at = fields.indexOf('payload');
      try {
        events.push({ id, payload: JSON.parse(fields[at + 1]) as T });
      } catch {
        // an unreadable entry is skipped
      }
    }
    return { events, incomplete: !stillThere && (await this.trimmedBefore(key, afterId)) };
  }

  /**
   * Whether events after `afterId`, which is no longer retained, may have been trimmed. Trimming
   * leaves no record of the ids it removed (max-deleted-entry-id only follows XDEL), so: entries
   * older than the first retained one were removed. The one false alarm is a client whose last
   * event was exactly the last one trimmed; the comment says "may".
   */
  private async trimmedBefore(key: string, afterId: string): Promise<boolean> {
    const info = (await this.redis.client.xinfo('STREAM', key).catch(() => undefined)) as unknown[] | undefined;
    // No stream: nothing retained. Something was missed if the id is older than the retention.
    if (!info) return Number(afterId.split('-')[0]) < Date.now() - this.config.EVENTS_REPLAY_SECONDS * 1000;
    const field = (name: string) => info[info.indexOf(name) + 1];
    const added = Number(field('entries-added'));
    const length = Number(field('length'));
    const first = field('first-entry') as [string, string[]] | null;
    return added > length && first !== null && compareEventIds(first[0], afterId) > 0;
  }
}
