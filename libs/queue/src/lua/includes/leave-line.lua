--[[
  Takes generation `id` of namespace `ns` out of its namespace's line, and the namespace out of
  the pool's waiting set with its last one.
]]
local function leaveLine(line, waiting, id, ns)
  redis.call('ZREM', line, id)
  if redis.call('ZCARD', line) == 0 then redis.call('SREM', waiting, ns) end
end
