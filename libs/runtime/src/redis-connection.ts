import { Redis, type RedisOptions } from 'ioredis';

/** ioredis options from a redis:// or rediss:// URL (BullMQ does not take URLs). */
export function redisOptionsFromUrl(redisUrl: string): RedisOptions {
  const url = new URL(redisUrl);
  const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0;
  return {
    host: url.hostname || '127.0.0.1',
    port: url.port ? Number(url.port) : 6379,
    username: url.username ? decodeURIComponent(url.username) : undefined,
    password: url.password ? decodeURIComponent(url.password) : undefined,
    db: Number.isInteger(db) ? db : 0,
    ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

/**
 * BullMQ workers block on Redis and must retry forever rather than fail requests;
 * `maxRetriesPerRequest: null` is what BullMQ requires for them.
 */
export function createRedis(redisUrl: string, purpose: string, blocking = false): Redis {
  return new Redis({
    ...redisOptionsFromUrl(redisUrl),
    connectionName: `atelier:${purpose}`,
    maxRetriesPerRequest: blocking ? null : 3,
    enableReadyCheck: true,
    lazyConnect: false,
  });
}

/** Key/channel names under the installation's prefix, so runs and installs never collide. */
export class RedisNames {
  constructor(readonly prefix: string) {}
  /** BullMQ's own prefix (its keys become `<prefix>:bull:<queue>:...`). */
  get bullPrefix(): string {
    return `${this.prefix}:bull`;
  }
  channel(name: string): string {
    return `${this.prefix}:${name}`;
  }
  rpcReply(jobId: string): string {
    return `${this.prefix}:rpc-reply:${jobId}`;
  }
  key(...parts: string[]): string {
    return [this.prefix, ...parts].join(':');
  }
}
