--[[ doctor_leases: take out of a tenant's lease set the members that hold no
  valid lease (the instance is gone, ended, or not leased by this tenant), so
  its cap counts only real leases; then give the tenant back the rings it
  left at its cap (a lease ended, as complete/fail/reap do).
  KEYS[1] shard prefix
  ARGV[1] tenant
  ARGV[2..] instance ids (members of leases:<tenant>)
  Returns: {removed, kept}; kept: the instance is leased or running for this
  tenant on re-check.
  Upholds: caps count valid leases (invariant 7); a live lease is never touched. ]]
-- @include lib/rings.lua
-- @include lib/unpark.lua

local tenant = ARGV[1]
local tk = key_leases(tenant)
local removed, kept = 0, 0
for i = 2, #ARGV do
  local iid = ARGV[i]
  local f = redis.call('HMGET', key_ti(iid), 'state', 'tenant')
  if TASK_LEASED[f[1]] and f[2] == tenant then
    kept = kept + 1
  else
    removed = removed + redis.call('ZREM', tk, iid)
  end
end
if removed > 0 then unpark(tenant) end
return {removed, kept}
