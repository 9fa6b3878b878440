--[[ parked: the (queue, class) rings a tenant left at its cap or rate limit, kept
  as the field `parked` of its tenant hash: a comma list of <queue>|<class>
  (names hold neither a comma nor a bar).  Absent or empty: not parked, so the
  unpark at every lease end costs one HGET (lib/rings.lua reads the list
  itself: reap.lua is near Lua's limit of 200 locals). ]]

-- Whether the parked list `v` (the field's value, or nil) names (queue, class).
local function parked_in(v, queue, priority)
  if not v then return false end  -- HGET of no field: false
  return string.find(',' .. v .. ',', ',' .. queue .. '|' .. priority .. ',', 1, true) ~= nil
end

-- Record a tenant parked off (queue, class) (once).
local function park_off(tenant, queue, priority)
  local tk = key_tenant(tenant)
  local v = redis.call('HGET', tk, TENANT_PARKED)
  if parked_in(v, queue, priority) then return end
  local qc = queue .. '|' .. priority
  redis.call('HSET', tk, TENANT_PARKED, (v and v ~= '') and (v .. ',' .. qc) or qc)
end
