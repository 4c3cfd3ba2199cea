--[[
  Takes one slot per member in each of n concurrency sets, all or nothing. A set's members are
  scored by when their lease runs out (a process that died without giving its slot back frees it
  then); each member also gets an owner key naming its sets, so whoever ends the work releases it
  by name alone. The time is Redis's own.

  Input:
    KEYS[1..n]        the n concurrency sets
    KEYS[n+1..n+m]    one owner key per member
    ARGV[1]           n
    ARGV[2..n+1]      the n limits
    ARGV[n+2]         lease, ms
    ARGV[n+3..n+2+m]  the members

  Output:
    { 0, 0 } taken; { i, held } refused by set i, which holds `held`
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
local lease = tonumber(ARGV[n + 2])
local m = #KEYS - n
for i = 1, n do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  local held = redis.call('ZCARD', KEYS[i])
  if held + m > tonumber(ARGV[i + 1]) then return { i, held } end
end
local sets = {}
for i = 1, n do
  for j = 1, m do redis.call('ZADD', KEYS[i], now + lease, ARGV[n + 2 + j]) end
  if redis.call('PTTL', KEYS[i]) < lease then redis.call('PEXPIRE', KEYS[i], lease) end
  sets[i] = KEYS[i]
end
local owners = table.concat(sets, '\n')
for j = 1, m do redis.call('SET', KEYS[n + j], owners, 'PX', lease) end
return { 0, 0 }
