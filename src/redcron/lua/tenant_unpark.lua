--[[ tenant_unpark: give a tenant back the rings it left at its cap or rate
  limit, after its settings changed (redcron tenants set / reset): a raised
  cap or a faster rate would otherwise wait for one of its leases to end or
  for a park:<tenant> timer computed from the old rate.  lease.lua re-checks
  the limits and parks it again (with a new timer) if it is still short.
  KEYS[1] shard prefix
  ARGV[1] tenant
  Returns: 1 = it was parked, 0 = it was not.
  Upholds: a backlogged tenant still progresses (invariant 7). ]]
-- @include lib/unpark.lua

local tenant = ARGV[1]
if redis.call('HEXISTS', key_tenant(tenant), TENANT_PARKED) == 0 then return 0 end
unpark(tenant)
return 1
