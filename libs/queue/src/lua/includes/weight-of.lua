--[[
  The weight of namespace `ns` in the weights hash `weights` (1 when unset or not positive).
]]
local function weightOf(weights, ns)
  local w = tonumber(redis.call('HGET', weights, ns) or '1') or 1
  if w <= 0 then w = 1 end
  return w
end
