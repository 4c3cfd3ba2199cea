--[[
  Admits one more event stream of an API key while the key's streams on every live replica stay
  under the cap, and records this replica's count with it. A replica's entry lives until its
  alive-until passes (each replica renews its entries every 10 s); a dead replica's is dropped here.

  Input:
    KEYS[1]  the key's streams by replica (hash): replica id -> "<streams> <alive until, ms>"
    ARGV[1]  this replica's id
    ARGV[2]  this replica's streams of the key before this one
    ARGV[3]  the cap (EVENTS_MAX_STREAMS_PER_KEY)
    ARGV[4]  now (ms)
    ARGV[5]  this replica's alive-until (ms)
    ARGV[6]  the hash's own expiry (ms), past every lease, so a hash only dead replicas wrote goes

  Output:
    the key's open streams before this one when admitted, or -1 minus that number when at the cap
]]
local mine = tonumber(ARGV[2])
local open = mine
local now = tonumber(ARGV[4])
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  if entries[i] ~= ARGV[1] then
    local streams, alive = string.match(entries[i + 1], '^(%d+) (%d+)$')
    if streams and tonumber(alive) >= now then
      open = open + tonumber(streams)
    else
      redis.call('HDEL', KEYS[1], entries[i])
    end
  end
end
if open >= tonumber(ARGV[3]) then
  return -1 - open
end
redis.call('HSET', KEYS[1], ARGV[1], (mine + 1) .. ' ' .. ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return open
