--[[
  A generation ended or was cancelled: out of the pool's order and its namespace's line. One
  that was still waiting (a cancel) gives its namespace's place back: the finish tag steps back by
  1/weight, never below V, so the namespace's next generation does not wait behind places nobody
  holds any more.

  Input:
    KEYS[1]  the pool's order (sorted set)
    KEYS[2]  the pool's fair state (hash: namespace -> finish tag; '~v' V)
    KEYS[3]  the namespace's line (sorted set)
    KEYS[4]  the pool's waiting namespaces (set)
    KEYS[5]  the namespaces' weights (hash)
    ARGV[1]  the generation's id
    ARGV[2]  its namespace

  Output:
    1 if it was in the pool's order, else 0
]]
--- @include "includes/weight-of"
--- @include "includes/leave-line"

leaveLine(KEYS[3], KEYS[4], ARGV[1], ARGV[2])
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if removed == 1 then
  local w = weightOf(KEYS[5], ARGV[2])
  local f = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
  local v = tonumber(redis.call('HGET', KEYS[2], '~v') or '0')
  local back = math.max(v, f - 1 / w)
  if back < f then redis.call('HSET', KEYS[2], ARGV[2], string.format('%.9f', back)) end
end
return removed
