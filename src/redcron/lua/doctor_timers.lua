--[[ doctor_timers: take out of the timer set the instance members that wait for
  nothing (the instance is gone, or not scheduled / retry_wait); promote.lua
  would drop them when due, doing nothing else.
  KEYS[1] shard prefix
  ARGV[1..] instance ids (park:<tenant> and brk:<job> members are never touched)
  Returns: {removed, kept}.
  Upholds: one place per instance (a waiting instance keeps its timer). ]]

local timers = key_timers()
local removed, kept = 0, 0
for i = 1, #ARGV do
  local iid = ARGV[i]
  if string.match(iid, '^park:') or string.match(iid, '^brk:') then
    kept = kept + 1
  else
    local state = redis.call('HGET', key_ti(iid), 'state')
    if state == 'scheduled' or state == 'retry_wait' then
      kept = kept + 1
    else
      removed = removed + redis.call('ZREM', timers, iid)
    end
  end
end
return {removed, kept}
