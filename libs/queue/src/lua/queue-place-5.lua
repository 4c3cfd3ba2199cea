--[[
  Places dispatched generations in a pool's fair order (start-time fair queuing across
  namespaces; docs/api.md, "Fair scheduling"). A new generation of namespace n gets the tag
  max(V, F_n) + 1/weight_n, and F_n becomes that tag; its BullMQ priority is ceil(tag). Priority
  orders a namespace's own generations and nothing else: one that outranks some of its
  namespace's waiting ones takes the earliest of their places, and each of them moves one place on
  (the last to the new tag). A generation already placed keeps its place. Once the pool is empty
  and V has grown past 2^20, the tags start again from 0.

  Score in the pool's order = priority * 2^31 + arrival counter (BullMQ's own order for
  prioritized jobs, exact in a double); score in a namespace's line = rank * 2^40 + arrival.

  Input:
    KEYS[1]  the pool's order (sorted set: generation id -> score)
    KEYS[2]  the pool's fair state (hash: namespace -> finish tag F; '~v' V; '~seq' arrivals)
    KEYS[3]  the namespaces' weights (hash)
    KEYS[4]  the prefix of the namespaces' lines (KEYS[4] .. namespace: sorted set)
    KEYS[5]  the pool's waiting namespaces (set)
    ARGV[3i-2]  generation i's id
    ARGV[3i-1]  generation i's namespace
    ARGV[3i]    generation i's priority rank (0 high, 1 normal, 2 low)

  Output:
    the BullMQ priority of each generation given, then (id, priority) pairs of the namespace's
    waiting generations that moved one place on
]]
--- @include "includes/weight-of"

local SHIFT = 2147483648
local MAX_PRIORITY = 2097151
local LINE_SHIFT = 1099511627776

local v = tonumber(redis.call('HGET', KEYS[2], '~v') or '0')
if v > 1048576 and redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[2]); v = 0 end
local moved = {}
local given = {}
for i = 1, #ARGV, 3 do given[ARGV[i]] = true end
for i = 1, #ARGV, 3 do
  local id, ns, rank = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  if not redis.call('ZSCORE', KEYS[1], id) then
    local w = weightOf(KEYS[3], ns)
    local tag = math.max(v, tonumber(redis.call('HGET', KEYS[2], ns) or '0')) + 1 / w
    redis.call('HSET', KEYS[2], ns, string.format('%.9f', tag))
    local seq = redis.call('HINCRBY', KEYS[2], '~seq', 1) % SHIFT
    local p = math.min(MAX_PRIORITY, math.max(1, math.ceil(tag - 1e-9)))
    local score = p * SHIFT + seq
    local line = KEYS[4] .. ns
    -- The namespace's waiting generations this one outranks, in their order (ids whose place is gone are dropped).
    local behind = redis.call('ZRANGEBYSCORE', line, string.format('%.0f', (rank + 1) * LINE_SHIFT), '+inf')
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
    redis.call('ZADD', line, string.format('%.0f', rank * LINE_SHIFT + seq), id)
    redis.call('SADD', KEYS[5], ns)
  end
end
local out = {}
for i = 1, #ARGV, 3 do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  out[#out + 1] = s and math.floor(tonumber(s) / SHIFT) or 1
end
for other in pairs(moved) do
  if not given[other] then out[#out + 1] = other; out[#out + 1] = math.floor(tonumber(redis.call('ZSCORE', KEYS[1], other)) / SHIFT) end
end
return out
