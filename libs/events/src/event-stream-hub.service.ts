import { Inject, Injectable, Logger, Optional, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { ServerResponse } from 'node:http';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { GENERATION_COMPLETED_CHANNEL, type GenerationCompletedEvent } from '@atelier/contracts';
import { Metrics } from '@atelier/observability';
import { BroadcastBus } from '@atelier/runtime';
import { SignedUrls } from '@atelier/storage';

interface Connection {
  userId: string;
  res: ServerResponse;
  lastWrite: number;
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
 * Every replica receives every event (pub/sub) and delivers to its own connections only;
 * nothing is buffered for users who are not connected (the spec's delivery rule).
 */
@Injectable()
export class EventStreamHub implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(EventStreamHub.name);
  private readonly byUser = new Map<string, Set<Connection>>();
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
    private readonly urls: SignedUrls,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Optional() private readonly metrics?: Metrics,
    @Optional() private readonly adapterHost?: HttpAdapterHost,
  ) {}

  get connections(): number {
    let n = 0;
    for (const set of this.byUser.values()) n += set.size;
    return n;
  }

  async onModuleInit(): Promise<void> {
    this.unsubscribe = await this.bus.subscribe(GENERATION_COMPLETED_CHANNEL, (event) => this.deliver(event));
    // A draining server waits for its connections to end, and a stream never ends by itself:
    // end them when the HTTP server starts closing (SIGTERM), before it waits.
    const fastify = this.adapterHost?.httpAdapter?.getInstance?.() as { addHook?: (name: 'preClose', hook: (done: () => void) => void) => void } | undefined;
    fastify?.addHook?.('preClose', (done) => {
      this.endAll();
      done();
    });
  }

  /** Takes over a raw response as an SSE stream for `userId` until the client goes away. */
  open(userId: string, res: ServerResponse): void {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    const conn: Connection = { userId, res, lastWrite: Date.now() };
    let set = this.byUser.get(userId);
    if (!set) this.byUser.set(userId, (set = new Set()));
    set.add(conn);
    this.byAge.add(conn);
    this.armKeepAlive();
    this.metrics?.sseConnections.inc();
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      this.metrics?.sseConnections.dec();
      this.byAge.delete(conn);
      const current = this.byUser.get(userId);
      current?.delete(conn);
      if (current?.size === 0) this.byUser.delete(userId);
    };
    res.on('close', close);
    res.on('error', close);
  }

  private deliver(event: GenerationCompletedEvent): void {
    const set = this.byUser.get(event.userId);
    if (!set) return;
    const frame = `event: media_generation_completed\ndata: ${JSON.stringify(eventPayload(event, (k) => this.urls.url(k)))}\n\n`;
    for (const conn of set) this.write(conn, frame);
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
    if (conn.res.writableLength > this.config.EVENTS_MAX_BUFFER_BYTES) {
      this.logger.warn(`Disconnecting a slow event stream of user ${conn.userId}`);
      this.byAge.delete(conn);
      conn.res.destroy();
      return;
    }
    conn.res.write(frame);
    conn.lastWrite = Date.now();
    this.byAge.delete(conn);
    this.byAge.add(conn);
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.keepAlive);
    await this.unsubscribe?.();
    this.endAll();
  }

  /**
   * Ends every stream cleanly (a complete chunked response, not a reset), telling clients to
   * reconnect after a second: EventSource then reaches another replica.
   */
  private endAll(): void {
    for (const set of this.byUser.values()) for (const conn of set) if (!conn.res.writableEnded) conn.res.end('retry: 1000\n\n');
    this.byUser.clear();
    this.byAge.clear();
  }
}
