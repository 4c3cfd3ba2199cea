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
 * After disconnect() ioredis waits this long for the socket to close before destroying it.
 * Disconnecting while it is between reconnect attempts arms that timer on the already closed
 * socket, so it always runs out; the default 2 s kept closed services (and Jest) alive after
 * shutdown while Redis was unreachable. Every connection, BullMQ's included, sets it.
 */
export const REDIS_DISCONNECT_TIMEOUT_MS = 100;

/**
 * BullMQ workers block on Redis and must retry forever rather than fail requests;
 * `maxRetriesPerRequest: null` is what BullMQ requires for them. The connection is named
 * `<REDIS_PREFIX>:<purpose>` in CLIENT LIST, so deployments sharing one Redis tell theirs apart.
 */
export function createRedis(redisUrl: string, prefix: string, purpose: string, blocking = false): Redis {
  return new Redis({
    ...redisOptionsFromUrl(redisUrl),
    connectionName: `${prefix}:${purpose}`,
    maxRetriesPerRequest: blocking ? null : 3,
    enableReadyCheck: true,
    lazyConnect: false,
    disconnectTimeout: REDIS_DISCONNECT_TIMEOUT_MS,
  });
}

/**
 * Closes a connection without leaving anything behind. A connection still in its handshake
 * (a service closed right after it started, e.g. a failed start-up) is first given a moment to
 * become ready: closed mid-handshake, ioredis's pending ready check fails afterwards and
 * "recovers" by disconnecting the already closed socket, arming the disconnect timer on it
 * (see REDIS_DISCONNECT_TIMEOUT_MS), which kept the process (and Jest) alive. A connection that
 * cannot reach Redis is simply dropped.
 */
export async function closeRedis(conn: Redis, handshakeWaitMs = 1000): Promise<void> {
  if (conn.status === 'connecting' || conn.status === 'connect') {
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        for (const event of ['ready', 'close', 'end'] as const) conn.off(event, done);
        resolve();
      };
      const timer = setTimeout(done, handshakeWaitMs);
      for (const event of ['ready', 'close', 'end'] as const) conn.once(event, done);
    });
  }
  if (conn.status === 'end') return;
  if (conn.status === 'ready') {
    try {
      await conn.quit();
      return;
    } catch {
      // fall through to a hard disconnect
    }
  }
  conn.disconnect();
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
  /** The Redis stream a request/response queue's calls travel on (consumer group RPC_GROUP). */
  rpcStream(queue: string): string {
    return `${this.prefix}:rpc:${queue}`;
  }
  /** Failed calls of a request/response queue, kept for inspection (capped like removeOnFail). */
  rpcFailed(queue: string): string {
    return `${this.prefix}:rpc-failed:${queue}`;
  }
  /** A call's final reply, kept briefly so a caller that lost its reply channel can still read it. */
  rpcResult(jobId: string): string {
    return `${this.prefix}:rpc-result:${jobId}`;
  }
  /** A user's retained events (Redis stream), replayed to an event stream that resumes with Last-Event-ID. */
  userEvents(userId: string): string {
    return `${this.prefix}:user-events:${userId}`;
  }
  key(...parts: string[]): string {
    return [this.prefix, ...parts].join(':');
  }
}
