--[[ drr: weighted deficit round robin over the ring of one (queue, class).
  Each visit credits quantum x weight to the tenant's deficit (d:<queue>:<class>
  in its tenant hash; capped, so an idle or skipped tenant does not bank
  credit) and serves while it covers a task.  A visit cut short by the batch
  size stays at the head (v:<queue>:<class> = 1) and goes on at the next call
  without a new credit.  An empty tenant leaves the ring with its deficit
  reset.  Visits touch only tenants with ready work. ]]
-- @include lib/streams.lua
-- @include lib/ring_add.lua
-- @include lib/limits.lua
-- @include lib/take.lua

-- Serve the ring of (queue, priority) into the lease call `L` (lib/take.lua).
local function serve_ring(L, queue, priority)
  local out, want = L.out, L.want
  local ring = key_ring(queue, priority)
  local size = redis.call('ZCARD', ring)
  -- every visit serves at least one task, removes the tenant from the ring or
  -- moves entries of tasks the worker has not registered (bounded by SKIP_MAX)
  local visits = 0
  while #out < want and visits < want + size and L.skips < SKIP_MAX do
    visits = visits + 1
    local head = redis.call('ZRANGE', ring, 0, 0)
    local tenant = head[1]
    if not tenant then return end
    local th = key_tenant(tenant)
    local dfield, vfield = 'd:' .. queue .. ':' .. priority, 'v:' .. queue .. ':' .. priority
    local stream = key_q(queue, tenant, priority)
    local n = lease_room(L, tenant, queue, priority, ring)
    if n > 0 and redis.call('ZCARD', ring) == 1 then
      -- alone in the ring: nobody to share with, serve what fits (no rotation)
      local got, more = take(L, queue, tenant, priority, stream, n)
      if not more then
        redis.call('ZREM', ring, tenant)
        redis.call('HDEL', th, dfield, vfield)
      elseif got == 0 then
        return  -- its head does not fit this worker
      end
    elseif n > 0 then
      local s = redis.call('HMGET', th, dfield, vfield)
      local deficit = tonumber(s[1] or '') or 0
      local weight = tenant_limits(L.tenants, tenant, L.now).weight
      local quantum = L.quantum
      if s[2] ~= '1' then
        -- a new visit: credit quantum x weight (capped: an idle or skipped
        -- tenant does not bank credit)
        deficit = math.min(deficit + quantum * weight, quantum * weight + 1)
      end
      local k = math.min(n, math.floor(deficit))
      local got, more = 0, nil
      if k > 0 then
        got, more = take(L, queue, tenant, priority, stream, k)
      else
        more = ready_count(stream) > 0
      end
      deficit = deficit - got
      if not more then
        -- an empty tenant leaves the ring with its deficit reset (take() keeps
        -- the aging index when it ran)
        redis.call('ZREM', ring, tenant)
        redis.call('HDEL', th, dfield, vfield)
        if k <= 0 then redis.call('ZREM', key_oldest(queue, priority), tenant) end
      elseif #out >= want and deficit >= 1 then
        -- cut short by the batch size: stays at the head, goes on next call
        redis.call('HSET', th, dfield, deficit, vfield, '1')
      else
        redis.call('HSET', th, dfield, deficit)
        redis.call('HDEL', th, vfield)
        redis.call('ZREM', ring, tenant)
        ring_add(ring, tenant)
      end
    end
  end
end
