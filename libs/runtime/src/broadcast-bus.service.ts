import { SpanKind, tracing } from '@atelier/observability';
import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { ClientRedis } from '@nestjs/microservices';
import type { Redis } from 'ioredis';
import type { BroadcastChannel, BroadcastPayloadOf } from '@atelier/contracts';
import { closeRedis, redisOptionsFromUrl } from './redis-connection';
import { RedisService } from './redis.module';

type Listener = (payload: unknown) => void;

/**
 * Broadcasts that every replica must see (completion events, cancellations, key revocations),
 * over Redis pub/sub. Publishing goes through Nest's Redis transport `emit`, so the wire format
 * is Nest's `{pattern, data}` packet and any Nest Redis microservice can listen too. Never use
 * this for work that must happen once: every subscriber receives every message.
 */
@Injectable()
export class BroadcastBus implements OnApplicationShutdown {
  private readonly logger = new Logger(BroadcastBus.name);
  private readonly publisher: ClientRedis;
  private subscriber?: Redis;
  private readonly listeners = new Map<string, Set<Listener>>();

  constructor(private readonly redis: RedisService) {
    const { host, port, password, username, db, tls } = redisOptionsFromUrl(redis.config.REDIS_URL);
    this.publisher = new ClientRedis({ host, port, password, username, db, tls, retryAttempts: 5, retryDelay: 200 });
  }

  async publish<C extends BroadcastChannel<string, unknown>>(channel: C, payload: BroadcastPayloadOf<C>): Promise<void> {
    // With tracing on, the publish is a span of the work that caused it (a generation's completion event).
    const span = tracing.startSpan(`${channel.name} publish`, { kind: SpanKind.PRODUCER, attributes: { 'messaging.system': 'redis', 'messaging.destination.name': channel.name } });
    try {
      await this.publisher.connect();
      await new Promise<void>((resolve, reject) => {
        this.publisher.emit(this.redis.names.channel(channel.name), payload).subscribe({ complete: resolve, error: reject });
      });
    } catch (err) {
      tracing.failed(err, span, 'service_unavailable');
      throw err;
    } finally {
      span?.end();
    }
  }

  /**
   * As publish, and says how many processes' subscribers it reached (Redis's own count), for a
   * broadcast whose sender waits for each of them to act on it. The same wire format as publish.
   */
  async publishCounted<C extends BroadcastChannel<string, unknown>>(channel: C, payload: BroadcastPayloadOf<C>): Promise<number> {
    const name = this.redis.names.channel(channel.name);
    return this.redis.client.publish(name, JSON.stringify({ pattern: name, data: payload }));
  }

  /** Returns an unsubscribe function. Listener errors are logged, never thrown into Redis. */
  async subscribe<C extends BroadcastChannel<string, unknown>>(
    channel: C,
    listener: (payload: BroadcastPayloadOf<C>) => void,
  ): Promise<() => Promise<void>> {
    const name = this.redis.names.channel(channel.name);
    const subscriber = this.ensureSubscriber();
    let set = this.listeners.get(name);
    if (!set) {
      set = new Set();
      this.listeners.set(name, set);
      try {
        await subscriber.subscribe(name);
      } catch (err) {
        // Redis is unreachable: the service still starts (and its health check says why it is
        // unhealthy); the subscriber's 'ready' handler subscribes once Redis is back.
        this.logger.warn(`Could not subscribe to ${name} yet (${(err as Error).message}); retrying when Redis is reachable`);
      }
    }
    const wrapped = listener as Listener;
    set.add(wrapped);
    return async () => {
      const current = this.listeners.get(name);
      if (!current) return;
      current.delete(wrapped);
      if (current.size === 0) {
        this.listeners.delete(name);
        // Without Redis the command would only wait out its retries (shutdown would stall);
        // messages for a channel without listeners are ignored anyway.
        if (subscriber.status === 'ready') await subscriber.unsubscribe(name).catch(() => undefined);
      }
    };
  }

  private ensureSubscriber(): Redis {
    if (this.subscriber) return this.subscriber;
    const sub = this.redis.duplicate('broadcast-subscriber');
    sub.on('message', (channel: string, raw: string) => {
      const set = this.listeners.get(channel);
      if (!set) return;
      let data: unknown;
      try {
        data = (JSON.parse(raw) as { data?: unknown }).data;
      } catch {
        this.logger.warn(`Ignoring malformed message on ${channel}`);
        return;
      }
      for (const listener of set) {
        try {
          listener(data);
        } catch (err) {
          this.logger.error(`Listener on ${channel} failed: ${(err as Error).message}`);
        }
      }
    });
    // ioredis re-subscribes only channels whose SUBSCRIBE once succeeded; this also covers
    // those that failed while Redis was down. Subscribing twice to a channel is harmless.
    sub.on('ready', () => {
      for (const name of this.listeners.keys()) void sub.subscribe(name).catch(() => undefined);
    });
    this.subscriber = sub;
    return sub;
  }

  async onApplicationShutdown(): Promise<void> {
    await this.publisher.close().catch(() => undefined);
    if (this.subscriber) await closeRedis(this.subscriber);
  }
}
