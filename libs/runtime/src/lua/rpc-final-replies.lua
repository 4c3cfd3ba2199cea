--[[
  Sends calls' final replies: each is published on its reply channel and kept for a caller that
  reconnects; its call's stream entry is acknowledged and deleted (when given); a failure is
  appended to the queue's capped failed-calls stream (when given).

  Input, three keys per reply i (k = 3(i-1)):
    KEYS[k+1]  the kept reply
    KEYS[k+2]  the call stream
    KEYS[k+3]  the failed-calls stream
  ARGV[1]  seconds a reply is kept
  ARGV[2]  the call stream's consumer group
  then seven per reply i (a = 2 + 7(i-1)):
    ARGV[a+1]  reply channel
    ARGV[a+2]  reply
    ARGV[a+3]  entry id, or ''
    ARGV[a+4]  failed-calls cap
    ARGV[a+5]  job id, or '' (no failure record)
    ARGV[a+6]  error
    ARGV[a+7]  request id

  Output:
    the number of replies sent
]]
for i = 0, #KEYS / 3 - 1 do
  local k, a = i * 3, 2 + i * 7
  redis.call('PUBLISH', ARGV[a + 1], ARGV[a + 2])
  redis.call('SET', KEYS[k + 1], ARGV[a + 2], 'EX', ARGV[1])
  if ARGV[a + 3] ~= '' then
    redis.call('XACK', KEYS[k + 2], ARGV[2], ARGV[a + 3])
    redis.call('XDEL', KEYS[k + 2], ARGV[a + 3])
  end
  if ARGV[a + 5] ~= '' then
    redis.call('XADD', KEYS[k + 3], 'MAXLEN', '~', ARGV[a + 4], '*', 'job', ARGV[a + 5], 'error', ARGV[a + 6], 'request', ARGV[a + 7])
  end
end
return #KEYS / 3
