--[[ dlq_unindex: drop tenants whose DLQ stream is empty from the shard's DLQ
  index (dlqidx), so the cross-tenant DLQ list stops reading them.  A reader
  calls it with the tenants it found empty; the length is checked again here,
  in the same step as the removal, so an entry dead-lettered meanwhile (which
  ZADDs the tenant back in lib/dead.lua) never leaves its tenant unlisted.
  KEYS[1] shard prefix
  ARGV[1..] tenants
  Returns: how many tenants were dropped from the index.
  Upholds: dlqidx holds every tenant with a DLQ entry (a superset). ]]

local idx = key_dlqidx()
local dropped = 0
for i = 1, #ARGV do
  local tenant = ARGV[i]
  if redis.call('XLEN', key_dlq(tenant)) == 0 then
    dropped = dropped + redis.call('ZREM', idx, tenant)
  end
end
return dropped
