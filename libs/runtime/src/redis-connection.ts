import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

/** A connection to one Redis node or to a Redis Cluster: the same commands, routed by key in a cluster. */
export type RedisClient = Redis | Cluster;

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

/** Where Redis is: one node (REDIS_URL), or a cluster's seed nodes (REDIS_CLUSTER_NODES). */
export type RedisTarget = { kind: 'node'; url: string } | { kind: 'cluster'; nodes: { host: string; port: number }[]; options: RedisOptions };

export function redisTarget(config: { REDIS_URL: string; REDIS_CLUSTER_NODES?: string }): RedisTarget {
  if (!config.REDIS_CLUSTER_NODES) return { kind: 'node', url: config.REDIS_URL };
  const seeds = config.REDIS_CLUSTER_NODES.split(',').map((s) => s.trim()).filter(Boolean);
  const urls = seeds.map((s) => new URL(/^rediss?:\/\//.test(s) ? s : `redis://${s}`));
  // Credentials and TLS: the first seed given as a URL with them, else REDIS_URL's (a cluster has one db, 0).
  const withAuth = seeds.findIndex((s, i) => /^rediss?:\/\//.test(s) && (urls[i].username || urls[i].password || urls[i].protocol === 'rediss:'));
  const { username, password, tls } = redisOptionsFromUrl(withAuth >= 0 ? seeds[withAuth] : config.REDIS_URL);
  return {
    kind: 'cluster',
    nodes: urls.map((u) => ({ host: u.hostname, port: u.port ? Number(u.port) : 6379 })),
    options: { username, password, ...(tls ? { tls } : {}) },
  };
}

/**
 * BullMQ workers block on Redis and must retry forever rather than fail requests;
 * `maxRetriesPerRequest: null` is what BullMQ requires for them. The connection is named
 * `<REDIS_PREFIX>:<purpose>` in CLIENT LIST, so deployments sharing one Redis tell theirs apart.
 */
export function createRedis(target: RedisTarget | string, prefix: string, purpose: string, blocking = false): RedisClient {
  const t: RedisTarget = typeof target === 'string' ? { kind: 'node', url: target } : target;
  const common: RedisOptions = {
    connectionName: `${prefix}:${purpose}`,
    maxRetriesPerRequest: blocking ? null : 3,
    enableReadyCheck: true,
    disconnectTimeout: REDIS_DISCONNECT_TIMEOUT_MS,
  };
  if (t.kind === 'node') return new Redis({ ...redisOptionsFromUrl(t.url), ...common, lazyConnect: false });
  const options: ClusterOptions = {
    redisOptions: { ...t.options, ...common },
    // With TLS, node addresses are used as given rather than resolved first, so the certificate's
    // host name still matches (ioredis' recipe for ElastiCache and other managed clusters).
    ...(t.options.tls ? { dnsLookup: (address: string, callback: (err: Error | null, address: string) => void) => callback(null, address) } : {}),
    enableReadyCheck: true,
    lazyConnect: false,
    // A blocking worker waits on one node for as long as it takes; others fail fast into a 503.
    ...(blocking ? {} : { clusterRetryStrategy: (times: number) => Math.min(100 * times, 2000) }),
  };
  return new Cluster(t.nodes, options);
}

export function isCluster(client: RedisClient): client is Cluster {
  return (client as Cluster).isCluster === true;
}

/**
 * Closes a connection without leaving anything behind. A connection still in its handshake
 * (a service closed right after it started, e.g. a failed start-up) is first given a moment to
 * become ready: closed mid-handshake, ioredis's pending ready check fails afterwards and
 * "recovers" by disconnecting the already closed socket, arming the disconnect timer on it
 * (see REDIS_DISCONNECT_TIMEOUT_MS), which kept the process (and Jest) alive. A connection that
 * cannot reach Redis is simply dropped.
 */
export async function closeRedis(conn: RedisClient, handshakeWaitMs = 1000): Promise<void> {
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

/**
 * Key/channel names under the installation's prefix, so runs and installs never collide. In a
 * Redis Cluster (`clustered`) the part of a name that decides its shard is a hash tag: keys that a
 * script or transaction touches together share one (a queue's keys, a service's RPC streams, a fair
 * pool), and nothing else does, so the load spreads over the shards. On one node the names stay as
 * they always were, so an upgrade finds its queues and limits where it left them.
 */
export class RedisNames {
  private readonly shardTags = new Map<string, string>();

  constructor(
    readonly prefix: string,
    readonly clustered = false,
    /** Streams each request/response queue is spread over (RPC_STREAM_SHARDS). */
    readonly rpcShards = 1,
  ) {}
  /** `{part}` in a cluster (the hash tag that places the key), `part` on one node. */
  tag(part: string): string {
    return this.clustered ? `{${part}}` : part;
  }
  /** BullMQ's prefix for one queue (its keys become `<prefix>:bull[:{queue}]:<queue>:...`). */
  bullPrefix(queue: string): string {
    return this.clustered ? `${this.prefix}:bull:{${queue}}` : `${this.prefix}:bull`;
  }
  channel(name: string): string {
    return `${this.prefix}:${name}`;
  }
  rpcReply(jobId: string): string {
    return `${this.prefix}:rpc-reply:${jobId}`;
  }
  /**
   * One of a request/response queue's streams (`shard` of rpcShards) by its name, and in a cluster
   * its hash tag: chosen so the shards' slots fall in rpcShards equal parts of the slot space, as
   * `redis-cli --cluster create` gives equal parts to the primaries, so they land on different ones.
   */
  private rpcTag(queue: string, shard: number): string {
    if (!this.clustered) return shard === 0 ? queue : `${queue}~${shard}`;
    const cacheKey = `${queue} ${shard}`;
    let tag = this.shardTags.get(cacheKey);
    if (tag === undefined) {
      const [from, to] = [Math.floor((shard * 16384) / this.rpcShards), Math.floor(((shard + 1) * 16384) / this.rpcShards)];
      for (let n = shard; ; n++) {
        const slot = hashSlot(`${queue}~${n}`);
        if (slot >= from && slot < to) {
          tag = `{${queue}~${n}}`;
          break;
        }
      }
      this.shardTags.set(cacheKey, tag);
    }
    return tag;
  }
  /** The Redis stream a request/response queue's calls travel on (consumer group RPC_GROUP): one of its rpcShards. */
  rpcStream(queue: string, shard = 0): string {
    return `${this.prefix}:rpc:${this.rpcTag(queue, shard)}`;
  }
  /** Failed calls of a request/response queue's shard, kept for inspection (capped like removeOnFail). */
  rpcFailed(queue: string, shard = 0): string {
    return `${this.prefix}:rpc-failed:${this.rpcTag(queue, shard)}`;
  }
  /** A call's final reply, kept briefly so a caller that lost its reply channel can still read it (beside its stream). */
  rpcResult(queue: string, jobId: string, shard = 0): string {
    return this.clustered ? `${this.prefix}:rpc-result:${this.rpcTag(queue, shard)}:${jobId}` : `${this.prefix}:rpc-result:${jobId}`;
  }
  /** A user's retained events (Redis stream), replayed to an event stream that resumes with Last-Event-ID. */
  userEvents(userId: string): string {
    return `${this.prefix}:user-events:${this.tag(userId)}`;
  }
  /** The id an event was appended with (UserEventLog.append), beside the user's events. */
  userEventOnce(userId: string, once: string): string {
    return `${this.prefix}:user-event-once:${this.tag(userId)}:${once}`;
  }
  key(...parts: string[]): string {
    return [this.prefix, ...parts].join(':');
  }
}

/** CRC16 (XMODEM) of Redis Cluster's key hashing, built once. */
const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

/** The cluster slot of a key with no braces of its own (CLUSTER KEYSLOT). */
export function hashSlot(key: string): number {
  let crc = 0;
  for (const byte of Buffer.from(key)) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ byte) & 0xff];
  return crc % 16384;
}
