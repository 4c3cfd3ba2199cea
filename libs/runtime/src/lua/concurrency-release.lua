--[[
  Gives members' slots back. Unknown members (released already, or never taken) are skipped.

  Input:
    KEYS[j]  member j's owner key (the sets it holds a slot in, one per line)
    ARGV[j]  member j

  Output:
    the number of slots freed
]]
local freed = 0
for j = 1, #KEYS do
  local sets = redis.call('GET', KEYS[j])
  if sets then
    for set in string.gmatch(sets, '[^\n]+') do freed = freed + redis.call('ZREM', set, ARGV[j]) end
    redis.call('DEL', KEYS[j])
  end
end
return freed
