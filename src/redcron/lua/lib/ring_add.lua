--[[ ring_add: a tenant joins the tail of a (queue, class) rotation ring, the
  ring lease.lua walks (lib/drr.lua); lib/rings.lua has the rest of the
  ready side. ]]

-- Append a tenant at the tail of a rotation ring (no-op if already there).
-- Returns true when the tenant was added.
local function ring_add(ring, tenant)
  if redis.call('ZSCORE', ring, tenant) then return false end
  local last = redis.call('ZRANGE', ring, -1, -1, 'WITHSCORES')
  local score = 0
  if last[2] then score = tonumber(last[2]) + 1 end
  redis.call('ZADD', ring, score, tenant)
  return true
end
