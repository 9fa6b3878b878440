--[[ parked: the (queue, class) rings a tenant left at its cap or rate limit, kept
  as the field `parked` of its tenant hash: a comma list of <queue>|<class>
  (names hold neither a comma nor a bar).  Absent or empty: not parked, so the
  unpark at every lease end costs one HGET (lib/rings.lua reads the list
  itself: reap.lua is near Lua's limit of 200 locals). ]]

-- Whether a tenant is parked off (queue, class).
local function is_parked_off(tenant, queue, priority)
  local v = redis.call('HGET', key_tenant(tenant), TENANT_PARKED)
  if not v then return false end
  return string.find(',' .. v .. ',', ',' .. queue .. '|' .. priority .. ',', 1, true) ~= nil
end

-- Record a tenant parked off (queue, class) (once).
local function park_off(tenant, queue, priority)
  if is_parked_off(tenant, queue, priority) then return end
  local tk, qc = key_tenant(tenant), queue .. '|' .. priority
  local v = redis.call('HGET', tk, TENANT_PARKED)
  redis.call('HSET', tk, TENANT_PARKED, (v and v ~= '') and (v .. ',' .. qc) or qc)
end
