--[[
  A worker started a generation: the pool's virtual time V moves up to its place, and it leaves
  the pool's order and its namespace's line.

  Input:
    KEYS[1]  the pool's order (sorted set)
    KEYS[2]  the pool's fair state (hash; '~v' V)
    KEYS[3]  the namespace's line (sorted set)
    KEYS[4]  the pool's waiting namespaces (set)
    ARGV[1]  the generation's id
    ARGV[2]  its namespace

  Output:
    1 if it was in the pool's order, else 0
]]
--- @include "includes/leave-line"

local SHIFT = 2147483648

leaveLine(KEYS[3], KEYS[4], ARGV[1], ARGV[2])
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
local p = math.floor(tonumber(score) / SHIFT)
if p > tonumber(redis.call('HGET', KEYS[2], '~v') or '0') then redis.call('HSET', KEYS[2], '~v', p) end
return redis.call('ZREM', KEYS[1], ARGV[1])
