--[[ doctor_dlq: delete a tenant's DLQ entries whose instance exists but is not
  dead there (its loc names another place).  Entries whose instance expired
  with its run's retention are left: they still tell what died.
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
    if f[1] and not (f[1] == 'dead' and f[2] == 'dlq:' .. eid) then
      removed = removed + redis.call('XDEL', dlq, eid)
    else
      kept = kept + 1
    end
  end
end
return {removed, kept}
