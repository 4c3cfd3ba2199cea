import { Injectable } from '@nestjs/common';
import { QUEUE_WEIGHTS_KEY } from '@atelier/contracts';
import { redisScript, RedisService } from '@atelier/runtime';

type Pool = 'image' | 'video';

/** Score = BullMQ priority x 2^31 + arrival counter: the order BullMQ takes prioritized jobs in, exact in a double. */
const SHIFT = 2 ** 31;
/** BullMQ's highest priority number (2^21 - 1); tags beyond it share it, in arrival order. */
const MAX_PRIORITY = 2 ** 21 - 1;

/** Line score = priority rank x 2^40 + arrival counter: a namespace's own order, high before normal before low. */
const LINE_SHIFT = 2 ** 40;

export const QUEUE_PRIORITIES = ['high', 'normal', 'low'] as const;
export type QueuePriority = (typeof QUEUE_PRIORITIES)[number];

/**
 * Start-time fair queuing across namespaces, per pool (docs/api.md, "Fair scheduling").
 * Each namespace has a finish tag F; the pool has a virtual time V, the tag of the latest
 * generation a worker started. A new generation of namespace n gets tag max(V, F_n) + 1/weight_n,
 * and F_n becomes that tag. Generations run in tag order (BullMQ priority = ceil(tag)), so a
 * namespace with nothing waiting goes right after the round in progress, however long another's
 * backlog is, and backlogged namespaces share the workers in proportion to their weights.
 *
 * Priority orders a namespace's own generations and nothing else: the tags a namespace holds
 * are its places in the fair order, and they go to its generations by (priority, arrival). A
 * generation that outranks some of its namespace's waiting ones takes the earliest of their
 * places, and each of them moves one place on (the last to the new tag): the namespace holds
 * exactly the places it would have held, so it never gets ahead of another. The moved ones are
 * returned so their BullMQ priorities follow. A namespace's line (KEYS[4] .. namespace) lists
 * its waiting generations in that order.
 *
 * A generation already placed (a re-dispatch after a loss) keeps its place. Once the pool is
 * empty and V has grown past 2^20, the tags start again from 0.
 * Returns the priority of each generation given, then (id, priority) pairs of moved ones.
 */
/** Lua setting `w`: the weight of namespace `ns` in the weights hash `weights` (1 when unset or not positive). */
const WEIGHT_OF = (weights: string, ns: string) => `
local w = tonumber(redis.call('HGET', ${weights}, ${ns}) or '1') or 1
if w <= 0 then w = 1 end`;

const PLACE_LUA = `
local v = tonumber(redis.call('HGET', KEYS[2], '~v') or '0')
if v > 1048576 and redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[2]); v = 0 end
local moved = {}
local given = {}
for i = 1, #ARGV, 3 do given[ARGV[i]] = true end
for i = 1, #ARGV, 3 do
  local id, ns, rank = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  if not redis.call('ZSCORE', KEYS[1], id) then
    ${WEIGHT_OF('KEYS[3]', 'ns')}
    local tag = math.max(v, tonumber(redis.call('HGET', KEYS[2], ns) or '0')) + 1 / w
    redis.call('HSET', KEYS[2], ns, string.format('%.9f', tag))
    local seq = redis.call('HINCRBY', KEYS[2], '~seq', 1) % ${SHIFT}
    local p = math.min(${MAX_PRIORITY}, math.max(1, math.ceil(tag - 1e-9)))
    local score = p * ${SHIFT} + seq
    local line = KEYS[4] .. ns
    -- The namespace's waiting generations this one outranks, in their order (ids whose place is gone are dropped).
    local behind = redis.call('ZRANGEBYSCORE', line, string.format('%.0f', (rank + 1) * ${LINE_SHIFT}), '+inf')
    local places = {}
    local kept = {}
    for _, other in ipairs(behind) do
      local s = redis.call('ZSCORE', KEYS[1], other)
      if s then places[#places + 1] = tonumber(s); kept[#kept + 1] = other else redis.call('ZREM', line, other) end
    end
    if #kept > 0 then
      redis.call('ZADD', KEYS[1], string.format('%.0f', places[1]), id)
      for k, other in ipairs(kept) do
        local s = places[k + 1] or score
        redis.call('ZADD', KEYS[1], string.format('%.0f', s), other)
        moved[other] = true
      end
    else
      redis.call('ZADD', KEYS[1], string.format('%.0f', score), id)
    end
    redis.call('ZADD', line, string.format('%.0f', rank * ${LINE_SHIFT} + seq), id)
    redis.call('SADD', KEYS[5], ns)
  end
end
local out = {}
for i = 1, #ARGV, 3 do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  out[#out + 1] = s and math.floor(tonumber(s) / ${SHIFT}) or 1
end
for other in pairs(moved) do
  if not given[other] then out[#out + 1] = other; out[#out + 1] = math.floor(tonumber(redis.call('ZSCORE', KEYS[1], other)) / ${SHIFT}) end
end
return out`;

/** Takes generation ARGV[1] of namespace ARGV[2] out of its namespace's line (KEYS[3]), and the namespace out of the waiting set (KEYS[4]) with its last one. */
const LEAVE_LINE = `
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('ZCARD', KEYS[3]) == 0 then redis.call('SREM', KEYS[4], ARGV[2]) end`;

/**
 * The generation ended or was cancelled: out of the pool's order and its namespace's line. One
 * that was still waiting (a cancel) gives its namespace's place back: the finish tag (KEYS[2])
 * steps back by 1/weight (KEYS[5]), never below V, so a namespace's next generation does not wait
 * behind places nobody holds any more.
 */
const REMOVE_LUA = `${LEAVE_LINE}
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if removed == 1 then
  ${WEIGHT_OF('KEYS[5]', 'ARGV[2]')}
  local f = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
  local v = tonumber(redis.call('HGET', KEYS[2], '~v') or '0')
  local back = math.max(v, f - 1 / w)
  if back < f then redis.call('HSET', KEYS[2], ARGV[2], string.format('%.9f', back)) end
end
return removed`;

/** A worker started this generation: V moves up to its tag, and it leaves the waiting line. */
const STARTED_LUA = `${LEAVE_LINE}
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

  /** The namespaces with generations waiting in the pool. */
  private waitingKey(pool: Pool): string {
    return this.redis.names.key('queue-waiting', pool);
  }

  private lineKey(pool: Pool, namespaceId = ''): string {
    return this.redis.names.key('queue-line', pool, namespaceId);
  }

  /**
   * Places dispatched generations in the fair order, in the order given: the BullMQ priority of
   * each, and the waiting generations of their namespaces that moved one place on (their BullMQ
   * priorities must follow). One already placed keeps its place.
   */
  async add(
    pool: Pool,
    entries: { id: string; namespaceId: string; priority?: QueuePriority }[],
  ): Promise<{ priorities: number[]; moved: { id: string; priority: number }[] }> {
    if (entries.length === 0) return { priorities: [], moved: [] };
    const place = redisScript<(number | string)[]>(this.redis.client, 'atelierQueuePlace', PLACE_LUA, 5);
    const out = await place(
      this.key(pool),
      this.fairKey(pool),
      this.redis.names.key(QUEUE_WEIGHTS_KEY),
      this.lineKey(pool),
      this.waitingKey(pool),
      ...entries.flatMap((e) => [e.id, e.namespaceId, QUEUE_PRIORITIES.indexOf(e.priority ?? 'normal')]),
    );
    const moved: { id: string; priority: number }[] = [];
    for (let i = entries.length; i + 1 < out.length; i += 2) moved.push({ id: String(out[i]), priority: Number(out[i + 1]) });
    return { priorities: out.slice(0, entries.length).map(Number), moved };
  }

  /** A worker started the generation: it leaves the line, and the pool's virtual time moves to its place. */
  async started(pool: Pool, id: string, namespaceId: string): Promise<void> {
    const started = redisScript<number>(this.redis.client, 'atelierQueueStarted', STARTED_LUA, 4);
    await started(this.key(pool), this.fairKey(pool), this.lineKey(pool, namespaceId), this.waitingKey(pool), id, namespaceId);
  }

  /** The generation left the queue (ended, cancelled). */
  async remove(pool: Pool, id: string, namespaceId: string): Promise<void> {
    const remove = redisScript<number>(this.redis.client, 'atelierQueueRemoveGiveBack', REMOVE_LUA, 5);
    await remove(this.key(pool), this.fairKey(pool), this.lineKey(pool, namespaceId), this.waitingKey(pool), this.redis.names.key(QUEUE_WEIGHTS_KEY), id, namespaceId);
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

  /** The namespaces with generations waiting in the pool. */
  async waitingNamespaces(pool: Pool): Promise<string[]> {
    return this.redis.client.smembers(this.waitingKey(pool));
  }

  /** The first `count` ids of a pool, for the sweeper to drop any that are no longer queued. */
  async head(pool: Pool, count: number): Promise<string[]> {
    return this.redis.client.zrange(this.key(pool), 0, count - 1);
  }

  async removeMany(pool: Pool, entries: { id: string; namespaceId: string }[]): Promise<void> {
    for (const e of entries) await this.remove(pool, e.id, e.namespaceId);
  }
}
