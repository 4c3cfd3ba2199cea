import { Global, Inject, Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { outageError } from './backing-service-fault';
import type { ConnectionOptions } from 'bullmq';
import { closeRedis, createRedis, REDIS_DISCONNECT_TIMEOUT_MS, RedisNames, redisTarget, type RedisClient, type RedisTarget } from './redis-connection';

/** The process's shared Redis command connection (not for blocking or subscribing). */
@Injectable()
export class RedisService implements OnApplicationShutdown {
  readonly client: RedisClient;
  readonly names: RedisNames;
  /** One node (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES). */
  readonly target: RedisTarget;
  private connectedOnce = false;
  private readonly bullConnections: RedisClient[] = [];
  private sharedProducer?: RedisClient;

  constructor(@Inject(APP_CONFIG) readonly config: AppConfig) {
    this.target = redisTarget(config);
    this.client = createRedis(this.target, config.REDIS_PREFIX, 'commands');
    // Connection errors are reported by health checks; without a listener ioredis logs each retry.
    this.client.on('error', () => undefined);
    this.client.on('ready', () => (this.connectedOnce = true));
    const shards = config.RPC_STREAM_SHARDS ?? (this.target.kind === 'cluster' ? this.target.nodes.length : 1);
    this.names = new RedisNames(config.REDIS_PREFIX, this.target.kind === 'cluster', shards);
  }

  get clustered(): boolean {
    return this.target.kind === 'cluster';
  }

  /** A new dedicated connection (subscribers and blocking workers cannot share one). */
  duplicate(purpose: string, blocking = false): RedisClient {
    const conn = createRedis(this.target, this.config.REDIS_PREFIX, purpose, blocking);
    conn.on('error', () => undefined);
    return conn;
  }

  /**
   * BullMQ's connection for a Queue or Worker: on one node, options from which BullMQ makes (and
   * closes) its own; in a cluster, a Cluster client of ours (BullMQ takes a Cluster only as an
   * instance), closed with this service, after the workers that use it. Producers (Queues) share
   * one; each Worker has its own (BullMQ duplicates it again for its blocking reads).
   */
  bullConnection(purpose: string, blocking: boolean): ConnectionOptions {
    if (this.target.kind === 'node') return { url: this.target.url, maxRetriesPerRequest: blocking ? null : 3, disconnectTimeout: REDIS_DISCONNECT_TIMEOUT_MS };
    if (!blocking) return (this.sharedProducer ??= this.trackBull(this.duplicate('bullmq-queues')));
    return this.trackBull(this.duplicate(purpose, true));
  }

  private trackBull(conn: RedisClient): RedisClient {
    this.bullConnections.push(conn);
    return conn;
  }

  /**
   * Fails at once while the command connection is not ready: BullMQ waits for its connection
   * without limit, so without this check a request arriving during a Redis outage would hang
   * until Redis returned instead of getting its 503.
   */
  assertAvailable(): void {
    if (!this.available()) throw outageError('redis');
  }

  /**
   * False while a connection that once worked is lost (during an outage ioredis cycles through
   * close, reconnecting and connecting). Before the first connect calls may simply wait for it.
   */
  available(): boolean {
    return this.client.status === 'ready' || !this.connectedOnce;
  }

  async ping(): Promise<void> {
    await this.client.ping();
  }

  async onApplicationShutdown(): Promise<void> {
    await Promise.all([this.client, ...this.bullConnections].map((c) => closeRedis(c)));
  }
}

@Global()
@Module({ providers: [RedisService], exports: [RedisService] })
export class RedisModule {}
