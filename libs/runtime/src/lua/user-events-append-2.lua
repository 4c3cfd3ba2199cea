--[[
  Appends a user's event once: an event published again (the outbox sweeper's retry, or a first
  attempt that stalled past the sweeper's threshold and then went on) gets the id its first append
  was given instead of a second entry, so a replay never shows it twice. Trims what is past the
  retention, as every append does.

  Input:
    KEYS[1]  the user's event stream
    KEYS[2]  the event's once key (holds the id it was appended with)
    ARGV[1]  most entries kept (MAXLEN)
    ARGV[2]  oldest id kept (MINID)
    ARGV[3]  retention, seconds (the stream's and the once key's expiry)
    ARGV[4]  the payload (JSON)

  Output:
    the event's id
]]
local id = redis.call('GET', KEYS[2])
if id then return id end
id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[1], '*', 'payload', ARGV[4])
redis.call('XTRIM', KEYS[1], 'MINID', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], id, 'EX', ARGV[3])
return id
