--[[ doctor_dlq: delete a tenant's DLQ entries whose instance is not dead there:
  gone (no script leaves that: a run keeps its retention off while a task of it
  is in the DLQ; left by older versions or a hand edit), or its loc names
  another place.  Replay and discard could never act on such an entry.
  KEYS[1] shard prefix
  ARGV[1] tenant
  ARGV[2..] DLQ entry ids
  Returns: {removed, kept}.
  Upholds: one place per instance (replay and cancel find dead work by loc). ]]

local tenant = ARGV[1]
local dlq = key_dlq(tenant)
local removed, kept = 0, 0
for i = 2, #ARGV do
  local eid = ARGV[i]
  local e = redis.call('XRANGE', dlq, eid, eid)
  if e[1] then
    local iid
    for j = 1, #e[1][2], 2 do
      if e[1][2][j] == 'i' then iid = e[1][2][j + 1] end
    end
    local f = redis.call('HMGET', key_ti(iid or ''), 'state', 'loc')
    if not (f[1] == 'dead' and f[2] == 'dlq:' .. eid) then
      removed = removed + redis.call('XDEL', dlq, eid)
    else
      kept = kept + 1
    end
  end
end
return {removed, kept}
