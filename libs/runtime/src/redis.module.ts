import { Global, Inject, Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { outageError } from './backing-service-fault';
import { closeRedis, createRedis, RedisNames } from './redis-connection';

/** The process's shared Redis command connection (not for blocking or subscribing). */
@Injectable()
export class RedisService implements OnApplicationShutdown {
  readonly client: Redis;
  readonly names: RedisNames;
  private connectedOnce = false;

  constructor(@Inject(APP_CONFIG) readonly config: AppConfig) {
    this.client = createRedis(config.REDIS_URL, config.REDIS_PREFIX, 'commands');
    // Connection errors are reported by health checks; without a listener ioredis logs each retry.
    this.client.on('error', () => undefined);
    this.client.on('ready', () => (this.connectedOnce = true));
    this.names = new RedisNames(config.REDIS_PREFIX);
  }

  /** A new dedicated connection (subscribers and blocking workers cannot share one). */
  duplicate(purpose: string, blocking = false): Redis {
    const conn = createRedis(this.config.REDIS_URL, this.config.REDIS_PREFIX, purpose, blocking);
    conn.on('error', () => undefined);
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
    await closeRedis(this.client);
  }
}

@Global()
@Module({ providers: [RedisService], exports: [RedisService] })
export class RedisModule {}
