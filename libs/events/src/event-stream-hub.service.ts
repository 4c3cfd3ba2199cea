import { Inject, Injectable, Logger, Optional, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { ServerResponse } from 'node:http';
import os from 'node:os';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { ApiError, GENERATION_COMPLETED_CHANNEL, USER_EVENTS_CHANNEL, type GenerationCompletedEvent, type UserStreamEvent } from '@atelier/contracts';
import { Metrics } from '@atelier/observability';
import { randomToken } from '@atelier/random';
import {
  BroadcastBus,
  compareEventIds,
  EVENT_ID_PATTERN,
  EVENT_STREAM_HEADERS,
  loadLuaScript,
  luaCommand,
  luaDirectory,
  openStreamSink,
  RedisService,
  runPeriodically,
  sseFrame,
  UserEventLog,
  type StreamSink,
} from '@atelier/runtime';
import { SignedUrls } from '@atelier/storage';

const ADMIT = loadLuaScript(luaDirectory(__dirname, 'libs/events/src'), 'event-streams-admit-1.lua');
/** How long a replica's count of a key's streams stands without being renewed (it renews every third of it). */
const COUNT_LEASE_MS = 30_000;
/** How far before a subscriber's loss a catch-up reads (Redis's clock and ours may differ). */
const CATCH_UP_MARGIN_MS = 2000;
/** How long live deliveries are remembered for a catch-up (it runs a second after a loss). */
const CATCH_UP_WINDOW_MS = 15_000;

/** What a user's stream carries: generation completions (the contract's event), and the others by their type. */
type StreamEvent = GenerationCompletedEvent | UserStreamEvent;

/** One event as written to a stream: its id (absent from older publishers) and the whole SSE frame. */
interface EventFrame {
  id?: string;
  frame: string;
}

interface Connection {
  userId: string;
  sink: StreamSink;
  /** When it opened (ms): a stream without Last-Event-ID is never sent an event from before it. */
  opened: number;
  lastWrite: number;
  /** Id of the last event written (or the client's Last-Event-ID): nothing at or before it is written again. */
  lastId?: string;
  /** While a resumed stream is sent what it missed, live events wait here, then follow in order. */
  held?: EventFrame[];
}

function tooManyStreams(max: number): ApiError {
  return new ApiError('rate_limited', `Too many open event streams: at most ${max} per API key at once (EVENTS_MAX_STREAMS_PER_KEY); close one first`, {
    limit: 'event_streams',
    max_streams: max,
  });
}

/** The public payload of media_generation_completed (the spec's fields plus status/model). */
export function eventPayload(event: GenerationCompletedEvent, url: (key: string) => string): Record<string, unknown> {
  const base = { generation_id: event.generation_id, status: event.status, media_type: event.media_type, model: event.model_name };
  return event.status === 'succeeded'
    ? { ...base, url: event.result_key ? url(event.result_key) : null }
    : { ...base, error: event.error_message };
}

/**
 * Fans completion broadcasts out to this replica's SSE connections of the event's owner.
 * Every replica receives every event (pub/sub) and delivers to its own connections only.
 * Every event carries an `id:` (its id in the owner's UserEventLog). A stream opened without
 * Last-Event-ID gets live events only (the spec's delivery rule); one opened with it is first
 * sent the retained events after that id, then live ones, and no event twice.
 */
@Injectable()
export class EventStreamHub implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(EventStreamHub.name);
  private readonly byUser = new Map<string, Set<Connection>>();
  /** Ids delivered live to each user's streams lately, with when (catchUpUser tells by them what a stream already had). */
  private readonly delivered = new Map<string, { id: string; at: number }[]>();
  /** Open (and admitted, about to open) streams of each API key on this replica; Redis holds every replica's. */
  private readonly perKey = new Map<string, number>();
  /** This replica's name in the keys' stream counts. */
  private readonly replicaId = `${os.hostname()}:${process.pid}:${randomToken(6)}`;
  private renewing?: { stop(): Promise<void> };
  /**
   * Every connection in order of its last write (a write moves it to the end), so the ones due
   * a keep-alive are always at the front: one timer, armed for the oldest connection's due time,
   * serves 10k streams and fires exactly EVENTS_KEEPALIVE_MS after each stream's last write.
   */
  private readonly byAge = new Set<Connection>();
  private unsubscribe?: () => Promise<void>;
  private keepAlive?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly bus: BroadcastBus,
    private readonly log: UserEventLog,
    private readonly urls: SignedUrls,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Optional() private readonly metrics?: Metrics,
    @Optional() private readonly adapterHost?: HttpAdapterHost,
    @Optional() private readonly redis?: RedisService,
  ) {}

  get connections(): number {
    let n = 0;
    for (const set of this.byUser.values()) n += set.size;
    return n;
  }

  async onModuleInit(): Promise<void> {
    const completions = await this.bus.subscribe(GENERATION_COMPLETED_CHANNEL, (event) => this.deliver(event));
    const others = await this.bus.subscribe(USER_EVENTS_CHANNEL, (event) => this.deliver(event));
    const gaps = this.bus.onGap((since) => this.catchUp(since));
    this.unsubscribe = async () => {
      gaps();
      await completions();
      await others();
    };
    this.renewing = runPeriodically(COUNT_LEASE_MS / 3, () => this.renewCounts(), () => undefined);
    // A draining server waits for its connections to end, and a stream never ends by itself:
    // end them when the HTTP server starts closing (SIGTERM), before it waits.
    const fastify = this.adapterHost?.httpAdapter?.getInstance?.() as { addHook?: (name: 'preClose', hook: (done: () => void) => void) => void } | undefined;
    fastify?.addHook?.('preClose', (done) => {
      this.endAll();
      done();
    });
  }

  /**
   * 429 when the key already holds EVENTS_MAX_STREAMS_PER_KEY streams across all replicas (each
   * open stream holds a socket and its write buffer for as long as the client likes). The stream
   * is counted from here: `open` must follow. While Redis cannot be reached, this replica's own
   * count decides.
   */
  async admit(keyPrefix: string): Promise<void> {
    const max = this.config.EVENTS_MAX_STREAMS_PER_KEY;
    const held = this.perKey.get(keyPrefix) ?? 0;
    if (held >= max) throw tooManyStreams(max);
    // Counted before the round trip, so a concurrent admit on this replica sees it.
    this.perKey.set(keyPrefix, held + 1);
    if (!this.redis) return;
    let open: number;
    try {
      const now = Date.now();
      open = await luaCommand<number>(this.redis.client, ADMIT)(this.countKey(keyPrefix), this.replicaId, held, max, now, now + COUNT_LEASE_MS, 3 * COUNT_LEASE_MS);
    } catch {
      return;
    }
    if (open < 0) {
      this.forget(keyPrefix);
      throw tooManyStreams(max);
    }
  }

  private countKey(keyPrefix: string): string {
    return this.redis!.names.key('event-streams', keyPrefix);
  }

  /** One stream of the key ended (or was refused): this replica's count, here and in Redis. */
  private forget(keyPrefix: string): void {
    const left = (this.perKey.get(keyPrefix) ?? 1) - 1;
    if (left > 0) this.perKey.set(keyPrefix, left);
    else this.perKey.delete(keyPrefix);
    if (!this.redis) return;
    const write = left > 0 ? this.redis.client.hset(this.countKey(keyPrefix), this.replicaId, `${left} ${Date.now() + COUNT_LEASE_MS}`) : this.redis.client.hdel(this.countKey(keyPrefix), this.replicaId);
    // Lost with Redis away: the entry then expires with its lease, or the next renewal sets it right.
    write.catch(() => undefined);
  }

  /** Renews this replica's count of every key it holds streams of (the lease other replicas read it by). */
  private async renewCounts(): Promise<void> {
    const stale = Date.now() - CATCH_UP_WINDOW_MS;
    for (const [userId, list] of this.delivered) if (list[list.length - 1].at < stale) this.delivered.delete(userId);
    if (!this.redis || this.perKey.size === 0) return;
    const until = Date.now() + COUNT_LEASE_MS;
    if (this.redis.clustered) {
      // A cluster pipeline must stay on one node; the keys' counts are spread over the shards.
      const client = this.redis.client;
      await Promise.all([...this.perKey].map(([keyPrefix, n]) => client.multi().hset(this.countKey(keyPrefix), this.replicaId, `${n} ${until}`).pexpire(this.countKey(keyPrefix), 3 * COUNT_LEASE_MS).exec()));
      return;
    }
    const batch = this.redis.client.pipeline();
    for (const [keyPrefix, n] of this.perKey) {
      batch.hset(this.countKey(keyPrefix), this.replicaId, `${n} ${until}`);
      batch.pexpire(this.countKey(keyPrefix), 3 * COUNT_LEASE_MS);
    }
    await batch.exec();
  }

  /**
   * Takes over a raw response as an SSE stream for `userId` until the client goes away. With a
   * `lastEventId` (the Last-Event-ID header of a reconnecting EventSource) the retained events
   * after it are sent first. A `keyPrefix` stream was counted by `admit`; its close gives the slot back.
   */
  open(userId: string, res: ServerResponse, lastEventId?: string, keyPrefix?: string): void {
    const resume = lastEventId !== undefined && EVENT_ID_PATTERN.test(lastEventId) ? lastEventId : undefined;
    let closed = false;
    // Its sink comes below, once the head is sent; until then a close finds it in no list.
    const now = Date.now();
    const conn = { userId, opened: now, lastWrite: now, lastId: resume, held: resume ? [] : undefined } as Omit<Connection, 'sink'> as Connection;
    const close = () => {
      if (closed) return;
      closed = true;
      if (keyPrefix !== undefined) this.forget(keyPrefix);
      this.metrics?.sseConnections.dec();
      this.byAge.delete(conn);
      const current = this.byUser.get(userId);
      current?.delete(conn);
      if (current?.size === 0) this.byUser.delete(userId);
    };
    this.metrics?.sseConnections.inc();
    conn.sink = openStreamSink(
      res,
      EVENT_STREAM_HEADERS,
      close,
    );
    // A client gone before its head was even sent.
    if (closed) return;
    let set = this.byUser.get(userId);
    if (!set) this.byUser.set(userId, (set = new Set()));
    set.add(conn);
    this.byAge.add(conn);
    this.armKeepAlive();
    if (resume) void this.replay(conn, resume);
  }

  /**
   * This replica's subscriber may have missed broadcasts since `since` (BroadcastBus.onGap): each
   * open stream is sent the retained events from a little before then (Redis's clock may differ
   * from ours) that it has not had, as a resumed stream is.
   */
  private catchUp(since: number): void {
    const from = since - CATCH_UP_MARGIN_MS;
    for (const [userId, set] of this.byUser) void this.catchUpUser(userId, set, from);
  }

  /**
   * One read of the user's log for all of its streams. An event missed while the subscriber was
   * away can be older than one delivered since (events are delivered as they are published, not
   * in id order), so what each stream already had is told by the ids delivered live since it
   * opened, not by its last id.
   */
  private async catchUpUser(userId: string, set: Set<Connection>, from: number): Promise<void> {
    let events: { id: string; payload: StreamEvent }[];
    try {
      ({ events } = await this.log.after<StreamEvent>(userId, `${from}-0`));
    } catch (err) {
      this.logger.warn(`Catching up ${userId}'s streams failed: ${(err as Error).message}`);
      return;
    }
    const delivered = this.delivered.get(userId) ?? [];
    const sent = new Set<string>();
    for (const conn of set) {
      // A stream being resumed reads the log itself.
      if (conn.held) continue;
      const had = new Set(delivered.filter((d) => d.at >= conn.opened).map((d) => d.id));
      for (const { id, payload } of events) {
        // From before the stream opened: a live-only stream never gets those, a resumed one had them replayed.
        if (had.has(id) || Number(id.split('-')[0]) < conn.opened) continue;
        const { frame } = this.frame({ ...payload, event_id: id });
        if (conn.lastId === undefined || compareEventIds(id, conn.lastId) > 0) conn.lastId = id;
        this.write(conn, frame);
        sent.add(id);
      }
    }
    // The next catch-up (there are two a loss) knows these went out.
    for (const id of sent) this.remember(userId, id);
  }

  /** Remembers a live delivery to the user's streams for CATCH_UP_WINDOW_MS (catchUpUser). */
  private remember(userId: string, id: string): void {
    const now = Date.now();
    let list = this.delivered.get(userId);
    if (!list) this.delivered.set(userId, (list = []));
    while (list.length > 0 && list[0].at < now - CATCH_UP_WINDOW_MS) list.shift();
    list.push({ id, at: now });
  }

  /** Sends a resumed stream the retained events after `afterId`, then the live ones held meanwhile. */
  private async replay(conn: Connection, afterId: string): Promise<void> {
    try {
      const { events, incomplete } = await this.log.after<StreamEvent>(conn.userId, afterId);
      if (incomplete)
        this.write(conn, `: some events after ${afterId} are no longer retained (older than ${this.config.EVENTS_REPLAY_SECONDS} s or beyond the last 1000) and may be missing\n\n`);
      for (const { id, payload } of events) this.send(conn, this.frame({ ...payload, event_id: id }));
    } catch (err) {
      this.logger.warn(`Replaying events after ${afterId} failed: ${(err as Error).message}`);
      this.write(conn, `: the events after ${afterId} could not be replayed (the event store is temporarily unavailable); live events follow\n\n`);
    } finally {
      const held = conn.held ?? [];
      conn.held = undefined;
      for (const frame of held) this.send(conn, frame);
    }
  }

  private deliver(event: StreamEvent): void {
    const set = this.byUser.get(event.userId);
    if (!set) return;
    // Built once for all of the owner's streams on this replica.
    const frame = this.frame(event);
    if (frame.id !== undefined) this.remember(event.userId, frame.id);
    for (const conn of set) {
      if (conn.held) conn.held.push(frame);
      else this.send(conn, frame);
    }
  }

  private frame(event: StreamEvent): EventFrame {
    const id = event.event_id;
    const [type, data] =
      'type' in event ? [event.type, JSON.stringify(event.data)] : ['media_generation_completed', JSON.stringify(eventPayload(event, (k) => this.urls.url(k)))];
    return { id, frame: sseFrame(data, type, id) };
  }

  /** Writes one event unless this stream already had it (replayed, or at or before its Last-Event-ID). */
  private send(conn: Connection, { id, frame }: EventFrame): void {
    if (id !== undefined) {
      if (conn.lastId !== undefined && compareEventIds(id, conn.lastId) <= 0) return;
      conn.lastId = id;
    }
    this.write(conn, frame);
  }

  /** Arms the one timer for the oldest connection, unless it is already armed (it then re-arms itself). */
  private armKeepAlive(): void {
    if (this.keepAlive || this.stopped) return;
    const oldest = this.byAge.values().next().value;
    if (!oldest) return;
    const wait = Math.max(0, oldest.lastWrite + this.config.EVENTS_KEEPALIVE_MS - Date.now());
    this.keepAlive = setTimeout(() => {
      this.keepAlive = undefined;
      this.sendKeepAlives();
      this.armKeepAlive();
    }, wait);
    this.keepAlive.unref();
  }

  private sendKeepAlives(): void {
    // Timers fire a little late, never early; a few ms of slack lets near-simultaneous streams share one wake-up.
    const due = Date.now() - this.config.EVENTS_KEEPALIVE_MS + 5;
    for (const conn of this.byAge) {
      // Ordered by last write: the first one not due ends the scan (written ones move behind it).
      if (conn.lastWrite > due) break;
      this.write(conn, ': keep-alive\n\n');
    }
  }

  /** A client that stops reading is cut off once its backlog passes the limit, so it cannot hold memory or slow others. */
  private write(conn: Connection, frame: string): void {
    if (conn.sink.backlog > this.config.EVENTS_MAX_BUFFER_BYTES) {
      this.logger.warn(`Disconnecting a slow event stream of user ${conn.userId}`);
      this.byAge.delete(conn);
      conn.sink.destroy();
      return;
    }
    conn.sink.write(frame);
    conn.lastWrite = Date.now();
    this.byAge.delete(conn);
    this.byAge.add(conn);
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.keepAlive);
    await this.renewing?.stop();
    await this.unsubscribe?.();
    this.endAll();
  }

  /**
   * Ends every stream cleanly (a complete chunked response, not a reset), telling clients to
   * reconnect after a second: EventSource then reaches another replica.
   */
  private endAll(): void {
    for (const set of this.byUser.values()) for (const conn of set) conn.sink.end('retry: 1000\n\n');
    this.byUser.clear();
    this.byAge.clear();
  }
}
