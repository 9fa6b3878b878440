--[[ admission: a tenant's max_queued and max_priority, checked before any
  write that makes work ready (enqueue, enqueue_check, fire). ]]
-- @include lib/clock.lua
-- @include lib/streams.lua

local PRIORITY_RANK = {high = 1, normal = 2, low = 3}

-- A tenant's admission settings: max_queued (0 = none) and the highest class
-- it may use (requests above it are clamped).
local function admission(tenant)
  local f = redis.call('HMGET', key_tenant(tenant), 'max_queued', 'max_priority')
  return tonumber(f[1] or '') or 0, PRIORITY_RANK[f[2] or ''] and f[2] or 'high'
end

local function clamp_priority(priority, max_priority)
  if PRIORITY_RANK[priority] < PRIORITY_RANK[max_priority] then return max_priority end
  return priority
end

-- Ready instances a tenant has queued on this shard (every queue and class),
-- plus those admitted multi-call enqueue batches still have to write (their
-- reservations, see enqueue_check.lua; one whose client died expires).
local function queued_count(tenant)
  local n = 0
  for _, queue in ipairs(redis.call('SMEMBERS', key_queues())) do
    for priority, _ in pairs(PRIORITY_RANK) do n = n + ready_count(key_q(queue, tenant, priority)) end
  end
  local rk = key_reserved(tenant)
  local r = redis.call('HGETALL', rk)
  if #r > 0 then
    local now = server_ms()
    local f = {}
    for i = 1, #r, 2 do f[r[i]] = r[i + 1] end
    for batch, exp in pairs(f) do
      local owner = string.match(batch, '^(.*):exp$')
      if owner then
        if tonumber(exp) > now then
          n = n + (tonumber(f[owner] or '0') or 0)
        else
          redis.call('HDEL', rk, owner, batch)
        end
      end
    end
  end
  return n
end

-- Admission: the refusal when `n` more ready instances would take `tenant`
-- past its `max_queued` (from admission(); 0 = no bound), nil when admitted;
-- `own` is what a multi-call batch reserved for itself, which queued_count
-- counts already.
local function over_quota(tenant, n, max_queued, own)
  if max_queued <= 0 or n <= 0 then return nil end
  local queued = queued_count(tenant) - (own or 0)
  if queued + n <= max_queued then return nil end
  return 'tenant ' .. tenant .. ' has ' .. queued .. ' queued; ' .. n
    .. ' more would exceed its max_queued of ' .. max_queued
end
