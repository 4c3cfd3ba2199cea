import { Global, Inject, Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import { APP_CONFIG, type AppConfig } from '@atelier/config';
import { closeRedis, createRedis, RedisNames } from './redis-connection';

/** The process's shared Redis command connection (not for blocking or subscribing). */
@Injectable()
export class RedisService implements OnApplicationShutdown {
  readonly client: Redis;
  readonly names: RedisNames;

  constructor(@Inject(APP_CONFIG) readonly config: AppConfig) {
    this.client = createRedis(config.REDIS_URL, 'commands');
    // Connection errors are reported by health checks; without a listener ioredis logs each retry.
    this.client.on('error', () => undefined);
    this.names = new RedisNames(config.REDIS_PREFIX);
  }

  /** A new dedicated connection (subscribers and blocking workers cannot share one). */
  duplicate(purpose: string, blocking = false): Redis {
    const conn = createRedis(this.config.REDIS_URL, purpose, blocking);
    conn.on('error', () => undefined);
    return conn;
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
