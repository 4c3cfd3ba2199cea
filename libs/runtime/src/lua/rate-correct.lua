--[[
  Gives back (or takes more of) what a request was counted for, once its real cost is known.

  Input:
    KEYS[1..n]  one key per limit (its TAT, as rate-take.lua keeps it)
    ARGV[i]     ms to move limit i's TAT by (negative: gives back)

  Output:
    1
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #KEYS do
  local tat = tonumber(redis.call('GET', KEYS[i]) or now) + tonumber(ARGV[i])
  if tat > now then redis.call('SET', KEYS[i], tat, 'PX', math.ceil(tat - now) + 1000) else redis.call('DEL', KEYS[i]) end
end
return 1
