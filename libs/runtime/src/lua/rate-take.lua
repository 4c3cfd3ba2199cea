--[[
  GCRA (the generic cell rate algorithm) for every limit at once: a request is admitted only if
  every limit admits it, and then counted in all of them. The time is Redis's own, so replicas
  with skewed clocks count the same; the stored state is one number per limit.

  Input:
    KEYS[1..n]  one key per limit (its theoretical arrival time, TAT)
    ARGV[3i-2]  limit i's emission interval in ms (period / limit)
    ARGV[3i-1]  limit i's period in ms (the burst it allows)
    ARGV[3i]    the units this request counts for in limit i

  Output:
    { now, 0 or -retryAfterMs, tat of each limit }
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tats = {}
local retry = 0
for i = 1, #KEYS do
  local interval = tonumber(ARGV[(i - 1) * 3 + 1])
  local period = tonumber(ARGV[(i - 1) * 3 + 2])
  local cost = tonumber(ARGV[(i - 1) * 3 + 3])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  local over = tat + cost * interval - period - now
  if over > 0 then retry = math.max(retry, over) end
  tats[i] = tat
end
local out = { now }
if retry > 0 then
  out[2] = -retry
  for i = 1, #KEYS do out[#out + 1] = tats[i] end
  return out
end
out[2] = 0
for i = 1, #KEYS do
  local interval = tonumber(ARGV[(i - 1) * 3 + 1])
  local cost = tonumber(ARGV[(i - 1) * 3 + 3])
  local nextTat = tats[i] + cost * interval
  redis.call('SET', KEYS[i], nextTat, 'PX', math.ceil(nextTat - now) + 1000)
  out[#out + 1] = nextTat
end
return out
