--[[ aging: ready work waiting in a lower class longer than the aging threshold
  per class step is served at a higher one, oldest tenants first (caps and
  rates apply), so nothing starves.  The aging index oldest:<queue>:<class>
  (tenant -> its oldest ready entry's time) finds it without a scan; it holds
  only tenants on the ring: one that is not (parked, or put back by a
  filtered lease) is dropped from it and the next one looked at, so a parked
  tenant's old work cannot hide everyone else's. ]]
-- @include lib/streams.lua
-- @include lib/take.lua

-- Serve, at class number ci of `classes`, the aged work of the lower classes
-- of queue into the lease call `L` (lib/take.lua; L.aging: the threshold in
-- ms, 0 = no aging).  Each visit drops a tenant from the aged set or fills the
-- batch; the bound is a safety net.
local function serve_aged(L, queue, ci, classes)
  local aging, out, want = L.aging, L.out, L.want
  if aging <= 0 then return end
  for lc = ci + 1, #classes do
    local lower_priority = classes[lc]
    local threshold = L.now - aging * (lc - ci)
    local index = key_oldest(queue, lower_priority)
    local ring = key_ring(queue, lower_priority)
    local visits = 0
    while #out < want and visits < want + 64 and L.skips < SKIP_MAX do
      local tenants = redis.call('ZRANGEBYSCORE', index, '-inf', threshold,
        'LIMIT', 0, want - #out)
      if #tenants == 0 then break end
      for _, tenant in ipairs(tenants) do
        if #out >= want then return end
        visits = visits + 1
        local stream = key_q(queue, tenant, lower_priority)
        if redis.call('ZSCORE', ring, tenant) then
          local n = lease_room(L, tenant, queue, lower_priority, ring)
          local more
          if n > 0 then
            more = select(2, take(L, queue, tenant, lower_priority, stream, n, tostring(threshold)))
          else
            more = ready_count(stream) > 0
          end
          if not more then
            redis.call('ZREM', ring, tenant)
            redis.call('HDEL', key_tenant(tenant), 'd:' .. queue .. ':' .. lower_priority,
              'v:' .. queue .. ':' .. lower_priority)
          end
        else
          redis.call('ZREM', index, tenant)
        end
      end
    end
    if #out >= want then return end
  end
end
