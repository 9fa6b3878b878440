--[[ doctor_ring: make one (queue, class)'s ring and aging index agree with the
  tenants' ready work: a tenant with ready entries that is neither on the
  ring nor parked goes on it (else nothing ever hands its work out); one on
  the ring with nothing ready leaves it with its deficit reset (as lease.lua
  does); the aging index holds only ring members, each at its oldest ready
  entry when missing.
  KEYS[1] shard prefix
  ARGV[1] queue   ARGV[2] class (high|normal|low)
  ARGV[3..] tenants
  Returns: one word per tenant: added | removed | aged (aging entry added) |
  unaged (aging entry of a tenant off the ring dropped) | in_place.
  Upholds: fair dispatch sees every tenant with ready work (invariant 7). ]]
-- @include lib/streams.lua
-- @include lib/rings.lua
-- @include lib/parked.lua

local queue, priority = ARGV[1], ARGV[2]
local ring, oldest = key_ring(queue, priority), key_oldest(queue, priority)
local out = {}
for i = 3, #ARGV do
  local tenant = ARGV[i]
  local ready = ready_count(key_q(queue, tenant, priority))
  local on = redis.call('ZSCORE', ring, tenant)
  local word = 'in_place'
  if ready > 0 and not on then
    if not parked_in(redis.call('HGET', key_tenant(tenant), TENANT_PARKED), queue, priority) then
      ring_add(ring, tenant)
      note_oldest(queue, priority, tenant)
      wake(queue, 1)
      word = 'added'
    end
  elseif ready > 0 then
    if not redis.call('ZSCORE', oldest, tenant) then
      note_oldest(queue, priority, tenant)
      word = 'aged'
    end
  elseif on then
    ring_leave(queue, priority, tenant)
    word = 'removed'
  end
  if word == 'in_place' and not on and redis.call('ZREM', oldest, tenant) == 1 then
    word = 'unaged'
  end
  out[#out + 1] = word
end
return out
