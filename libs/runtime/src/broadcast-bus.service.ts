import { SpanKind, tracing } from '@atelier/observability';
import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { ClientRedis } from '@nestjs/microservices';
import type { RedisClient } from './redis-connection';
import type { BroadcastChannel, BroadcastPayloadOf } from '@atelier/contracts';
import { loadLuaScript, luaCommand, RUNTIME_LUA } from './lua-script';
import { closeRedis, isCluster, redisOptionsFromUrl } from './redis-connection';
import { RedisService } from './redis.module';

type Listener = (payload: unknown) => void;

const PUBLISH_ON_SHARD = loadLuaScript(RUNTIME_LUA, 'publish-on-shard-1.lua');

/** When, after a cluster node left or came back, what was published meanwhile is read back (onGap). */
const CLUSTER_GAP_READS_MS = [1000, 5000];

/**
 * Broadcasts that every replica must see (completion events, cancellations, key revocations),
 * over Redis pub/sub. Publishing goes through Nest's Redis transport `emit`, so the wire format
 * is Nest's `{pattern, data}` packet and any Nest Redis microservice can listen too. Never use
 * this for work that must happen once: every subscriber receives every message.
 */
@Injectable()
export class BroadcastBus implements OnApplicationShutdown {
  private readonly logger = new Logger(BroadcastBus.name);
  /** Nest's Redis client on one node; in a cluster (which it cannot reach) the command connection publishes the same packet. */
  private readonly publisher?: ClientRedis;
  private subscriber?: RedisClient;
  private readonly gapListeners = new Set<(since: number) => void>();
  private readonly listeners = new Map<string, Set<Listener>>();

  constructor(private readonly redis: RedisService) {
    if (redis.clustered) return;
    const { host, port, password, username, db, tls } = redisOptionsFromUrl(redis.config.REDIS_URL);
    this.publisher = new ClientRedis({ host, port, password, username, db, tls, retryAttempts: 5, retryDelay: 200 });
  }

  async publish<C extends BroadcastChannel<string, unknown>>(channel: C, payload: BroadcastPayloadOf<C>): Promise<void> {
    // With tracing on, the publish is a span of the work that caused it (a generation's completion event).
    const span = tracing.startSpan(`${channel.name} publish`, { kind: SpanKind.PRODUCER, attributes: { 'messaging.system': 'redis', 'messaging.destination.name': channel.name } });
    try {
      const publisher = this.publisher;
      if (!publisher) await this.publishPacket(this.redis.names.channel(channel.name), payload);
      else {
        await publisher.connect();
        await new Promise<void>((resolve, reject) => {
          publisher.emit(this.redis.names.channel(channel.name), payload).subscribe({ complete: resolve, error: reject });
        });
      }
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
    const reached = await this.publishPacket(name, payload);
    const client = this.redis.client;
    if (!isCluster(client)) return reached;
    // A cluster node counts only its own subscribers, while the message reaches every node's:
    // the subscribers of the whole cluster are the sum over its nodes.
    const counts = await Promise.all(client.nodes('all').map((node) => node.pubsub('NUMSUB', name).then((r) => Number((r as [string, number])[1]) || 0)));
    return counts.reduce((a, b) => a + b, 0);
  }

  /** Nest's wire format, `{pattern, data}`; in a cluster from the shard of the channel's name (publish-on-shard-1.lua). */
  private publishPacket(name: string, payload: unknown): Promise<number> {
    const packet = JSON.stringify({ pattern: name, data: payload });
    if (this.redis.clustered) return luaCommand<number>(this.redis.client, PUBLISH_ON_SHARD)(name, name, packet);
    return this.redis.client.publish(name, packet);
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

  /**
   * `listener(since)` runs when this process's subscriber may have missed broadcasts since that
   * time (ms) and hears them again: on one node after its connection came back; in a Redis
   * Cluster after a node failed, which moves the subscriber to another node (pub/sub keeps nothing
   * for a subscriber that is away, so what was published meanwhile must be read from where it is
   * retained). Returns a function that removes it.
   */
  onGap(listener: (since: number) => void): () => void {
    this.gapListeners.add(listener);
    this.ensureSubscriber();
    return () => this.gapListeners.delete(listener);
  }

  private gap(since: number): void {
    for (const listener of this.gapListeners) {
      try {
        listener(since);
      } catch (err) {
        this.logger.error(`Gap listener failed: ${(err as Error).message}`);
      }
    }
  }

  private ensureSubscriber(): RedisClient {
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
    let lostAt: number | undefined;
    sub.on('close', () => (lostAt ??= Date.now()));
    sub.on('ready', () => {
      for (const name of this.listeners.keys()) void sub.subscribe(name).catch(() => undefined);
      if (lostAt !== undefined) this.gap(lostAt);
      lostAt = undefined;
    });
    // A cluster stays ready when a node fails: ioredis moves the subscriber to another node, and
    // what was published in between is read back, once the move is surely done and again later.
    // A node that comes back is a gap too: until it has rejoined the cluster's bus, what is
    // published on it reaches only its own subscribers.
    if (isCluster(sub))
      for (const event of ['-node', '+node'])
        sub.on(event, () => {
          const at = Date.now();
          for (const after of CLUSTER_GAP_READS_MS) setTimeout(() => this.gap(at), after).unref();
        });
    this.subscriber = sub;
    return sub;
  }

  async onApplicationShutdown(): Promise<void> {
    await this.publisher?.close().catch(() => undefined);
    if (this.subscriber) await closeRedis(this.subscriber);
  }
}
