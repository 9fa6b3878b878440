--[[ unpark: a tenant parked at its cap or rate limit (lib/parked.lua) goes back
  on its rings when a lease ends or its next token is due. ]]
-- @include lib/streams.lua
-- @include lib/rings.lua
-- @include lib/ring_add.lua

-- A tenant parked at its cap or rate limit goes back on the rings it left
-- (those where it still has ready work), and into their aging indexes; the
-- next lease re-checks the limits.
local function unpark(tenant)
  -- the field parked: a comma list of <queue>|<class> (lib/parked.lua)
  local tk = key_tenant(tenant)
  local parked = redis.call('HGET', tk, TENANT_PARKED)
  if not parked then return end
  redis.call('HDEL', tk, TENANT_PARKED)
  for qc in string.gmatch(parked, '[^,]+') do
    local queue, priority = string.match(qc, '^(.*)|(%a+)$')
    if queue and ready_count(key_q(queue, tenant, priority)) > 0 then
      ring_add(key_ring(queue, priority), tenant)
      note_oldest(queue, priority, tenant)
    end
  end
end
