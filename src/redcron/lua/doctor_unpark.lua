--[[ doctor_unpark: give a parked tenant its rings back when nothing would:
  it is below its cap (so no lease ending is awaited) and no park:<tenant>
  timer is set (so no rate token is awaited).  lease.lua re-checks the
  limits, and parks it again (with a timer) if it is still short.
  KEYS[1] shard prefix
  ARGV[1] tenant
  Returns: 1 = unparked, 0 = left (nothing parked, at its cap, or a token due).
  Upholds: a backlogged tenant still progresses (invariant 7). ]]
-- @include lib/streams.lua
-- @include lib/rings.lua
-- @include lib/unpark.lua

local tenant = ARGV[1]
if redis.call('HEXISTS', key_tenant(tenant), TENANT_PARKED) == 0 then return 0 end
local cap = tonumber(redis.call('HGET', key_tenant(tenant), 'max_in_flight') or '') or 0
if cap > 0 and redis.call('ZCARD', key_leases(tenant)) >= cap then return 0 end
if redis.call('ZSCORE', key_timers(), 'park:' .. tenant) then return 0 end
unpark(tenant)
return 1
