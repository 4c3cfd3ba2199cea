--[[
  Adds calls to a call stream, in order.

  Input:
    KEYS[1]     the call stream
    ARGV[1]     the approximate length cap (MAXLEN ~)
    ARGV[3i-1]  call i's job id
    ARGV[3i]    call i's payload
    ARGV[3i+1]  call i's traceparent ('' when tracing is off: no field)

  Output:
    the calls' entry ids, in order
]]
local ids = {}
for i = 2, #ARGV, 3 do
  if ARGV[i + 2] == '' then
    ids[#ids + 1] = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'job', ARGV[i], 'data', ARGV[i + 1])
  else
    ids[#ids + 1] = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'job', ARGV[i], 'data', ARGV[i + 1], 'tp', ARGV[i + 2])
  end
end
return ids
