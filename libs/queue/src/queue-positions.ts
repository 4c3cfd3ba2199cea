import { Injectable } from '@nestjs/common';
import { QUEUE_WEIGHTS_KEY } from '@atelier/contracts';
import { redisScript, RedisService } from '@atelier/runtime';

type Pool = 'image' | 'video';

/** Score = BullMQ priority x 2^31 + arrival counter: the order BullMQ takes prioritized jobs in, exact in a double. */
const SHIFT = 2 ** 31;
/** BullMQ's highest priority number (2^21 - 1); tags beyond it share it, in arrival order. */
const MAX_PRIORITY = 2 ** 21 - 1;

/**
 * Start-time fair queuing across namespaces, per pool (docs/api.md, "Fair scheduling").
 * Each namespace has a finish tag F; the pool has a virtual time V, the tag of the latest
 * generation a worker started. A new generation of namespace n gets tag max(V, F_n) + 1/weight_n,
 * and F_n becomes that tag. Generations run in tag order (BullMQ priority = ceil(tag)), so a
 * namespace with nothing waiting goes right after the round in progress, however long another's
 * backlog is, and backlogged namespaces share the workers in proportion to their weights.
 * A generation already placed (a re-dispatch after a loss) keeps its place. Once the pool is
 * empty and V has grown past 2^20, the tags start again from 0.
 */
const PLACE_LUA = `
local v = tonumber(redis.call('HGET', KEYS[2], '~v') or '0')
if v > 1048576 and redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[2]); v = 0 end
local out = {}
for i = 1, #ARGV, 2 do
  local id, ns = ARGV[i], ARGV[i + 1]
  local score = redis.call('ZSCORE', KEYS[1], id)
  if score then
    out[#out + 1] = math.floor(tonumber(score) / ${SHIFT})
  else
    local w = tonumber(redis.call('HGET', KEYS[3], ns) or '1') or 1
    if w <= 0 then w = 1 end
    local tag = math.max(v, tonumber(redis.call('HGET', KEYS[2], ns) or '0')) + 1 / w
    redis.call('HSET', KEYS[2], ns, string.format('%.9f', tag))
    local seq = redis.call('HINCRBY', KEYS[2], '~seq', 1) % ${SHIFT}
    local p = math.min(${MAX_PRIORITY}, math.max(1, math.ceil(tag - 1e-9)))
    redis.call('ZADD', KEYS[1], string.format('%.0f', p * ${SHIFT} + seq), id)
    out[#out + 1] = p
  end
end
return out`;

/** A worker started this generation: V moves up to its tag, and it leaves the waiting line. */
const STARTED_LUA = `
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
local p = math.floor(tonumber(score) / ${SHIFT})
if p > tonumber(redis.call('HGET', KEYS[2], '~v') or '0') then redis.call('HSET', KEYS[2], '~v', p) end
return redis.call('ZREM', KEYS[1], ARGV[1])`;

/**
 * Where each queued generation stands in its pool, in the fair order: a Redis sorted set per
 * pool (member the generation id, score its place), kept beside BullMQ's prioritized set, which
 * runs jobs in the same order. A generation leaves it when it starts, ends or is cancelled.
 * Reading a position is one ZRANK (O(log n)), not a count over the queue.
 */
@Injectable()
export class QueuePositions {
  constructor(private readonly redis: RedisService) {}

  private key(pool: Pool): string {
    return this.redis.names.key('queue-positions', pool);
  }

  private fairKey(pool: Pool): string {
    return this.redis.names.key('queue-fair', pool);
  }

  /**
   * Places dispatched generations in the fair order, in the order given, and returns the BullMQ
   * priority of each; one already placed keeps its place.
   */
  async add(pool: Pool, entries: { id: string; namespaceId: string }[]): Promise<number[]> {
    if (entries.length === 0) return [];
    const place = redisScript<number[]>(this.redis.client, 'atelierQueuePlace', PLACE_LUA, 3);
    return place(this.key(pool), this.fairKey(pool), this.redis.names.key(QUEUE_WEIGHTS_KEY), ...entries.flatMap((e) => [e.id, e.namespaceId]));
  }

  /** A worker started the generation: it leaves the line, and the pool's virtual time moves to its place. */
  async started(pool: Pool, id: string): Promise<void> {
    const started = redisScript<number>(this.redis.client, 'atelierQueueStarted', STARTED_LUA, 2);
    await started(this.key(pool), this.fairKey(pool), id);
  }

  /** The generation left the queue (ended, cancelled). */
  async remove(pool: Pool, id: string): Promise<void> {
    await this.redis.client.zrem(this.key(pool), id);
  }

  /** 0 = next to run; null when it is not waiting in the pool (or Redis does not know it). */
  async positions(entries: { id: string; pool: Pool }[]): Promise<Map<string, number | null>> {
    const out = new Map<string, number | null>();
    if (entries.length === 0) return out;
    if (entries.length === 1) {
      // A poll of one generation: the command alone, without a pipeline's own bookkeeping.
      const rank = await this.redis.client.zrank(this.key(entries[0].pool), entries[0].id);
      return out.set(entries[0].id, rank === null ? null : Number(rank));
    }
    const pipeline = this.redis.client.pipeline();
    for (const e of entries) pipeline.zrank(this.key(e.pool), e.id);
    const results = (await pipeline.exec()) ?? [];
    entries.forEach((e, i) => {
      const [err, rank] = results[i] ?? [];
      out.set(e.id, err || rank === null || rank === undefined ? null : Number(rank));
    });
    return out;
  }

  /** The first `count` ids of a pool, for the sweeper to drop any that are no longer queued. */
  async head(pool: Pool, count: number): Promise<string[]> {
    return this.redis.client.zrange(this.key(pool), 0, count - 1);
  }

  async removeMany(pool: Pool, ids: string[]): Promise<void> {
    if (ids.length > 0) await this.redis.client.zrem(this.key(pool), ...ids);
  }
}
