--[[
  Takes one slot per member in one concurrency set, or none: concurrency-acquire for a single set,
  for a Redis Cluster, where each set is its own hash tag and a request's sets are taken one
  script each (ConcurrencyLimiter gives back the slots of the others when one refuses). Members
  are scored by when their lease runs out; the time is Redis's own.

  Input:
    KEYS[1]     the concurrency set
    ARGV[1]     its limit
    ARGV[2]     lease, ms
    ARGV[3..]   the members

  Output:
    { 0, 0 } taken; { 1, held } refused, the set holding `held`
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
local m = #ARGV - 2
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held + m > tonumber(ARGV[1]) then return { 1, held } end
for j = 1, m do redis.call('ZADD', KEYS[1], now + lease, ARGV[2 + j]) end
if redis.call('PTTL', KEYS[1]) < lease then redis.call('PEXPIRE', KEYS[1], lease) end
return { 0, 0 }
