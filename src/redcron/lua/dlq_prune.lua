--[[ dlq_prune: drop a tenant's DLQ entries whose instance is gone, so nothing
  lists an entry that replay and discard can never act on.  No script leaves
  one (a run with a task in the DLQ keeps its retention off until the task
  leaves it: lib/runs.lua); entries written before that, or whose hash was
  deleted by hand, are what this removes.
  KEYS[1] shard prefix
  ARGV[1] tenant
  ARGV[2..] DLQ entry ids
  Returns: {entry id, instance id} of each entry dropped (re-checked here: an
  entry whose instance exists is left, whatever its state).
  Upholds: one place per instance (a DLQ entry always names a dead instance). ]]

local dlq = key_dlq(ARGV[1])
local out = {}
for i = 2, #ARGV do
  local eid = ARGV[i]
  local e = redis.call('XRANGE', dlq, eid, eid)
  if e[1] then
    local iid = ''
    for j = 1, #e[1][2], 2 do
      if e[1][2][j] == 'i' then iid = e[1][2][j + 1] end
    end
    if redis.call('EXISTS', key_ti(iid)) == 0 then
      redis.call('XDEL', dlq, eid)
      out[#out + 1] = {eid, iid}
    end
  end
end
return out
