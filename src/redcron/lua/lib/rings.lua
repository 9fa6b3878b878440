--[[ rings: the ready side of a (queue, class): a tenant with ready work sits
  on the rotation ring lease.lua walks and in the aging index (oldest:), and
  idle workers are woken through wake:<queue>. ]]
-- @include lib/streams.lua
-- @include lib/ring_add.lua
-- @include lib/wake.lua

-- Append an instance; the first append creates the stream with its group.
local function stream_add(stream, iid)
  if redis.call('EXISTS', stream) == 0 then
    redis.call('XGROUP', 'CREATE', stream, GROUP, '0', 'MKSTREAM')
  end
  return redis.call('XADD', stream, '*', 'i', iid)
end

-- Wake-ups gathered over one script call: one per instance made ready,
-- sent per queue at the end (wake() bounds each list).
local function gather_wake(woken, queue)
  woken[queue] = (woken[queue] or 0) + 1
end

local function wake_gathered(woken)
  for queue, n in pairs(woken) do wake(queue, n) end
end

-- Record a tenant's oldest ready entry in (queue, class) unless one is recorded
-- already (aging finds old work through this index, without a scan).  The
-- time is that of the first ready entry, not of `eid` (the entry just added):
-- a tenant that rejoins a ring (unparked, or new work while parked) may have
-- older entries queued, and the index drops a tenant while it is parked.
local function note_oldest(queue, priority, tenant, eid)
  local ok = key_oldest(queue, priority)
  if redis.call('ZSCORE', ok, tenant) then return end
  local first = first_ready(key_q(queue, tenant, priority)) or eid
  if first then redis.call('ZADD', ok, entry_ms(first), tenant) end
end

-- A tenant with nothing ready left in (queue, class) leaves its ring and the
-- aging index, and its DRR deficit and visit mark there are reset.
local function ring_leave(queue, priority, tenant)
  redis.call('ZREM', key_ring(queue, priority), tenant)
  redis.call('ZREM', key_oldest(queue, priority), tenant)
  redis.call('HDEL', key_tenant(tenant), 'd:' .. queue .. ':' .. priority,
    'v:' .. queue .. ':' .. priority)
end

-- Put an instance on its tenant's ready stream and the tenant on the ring.  One
-- with a rate goes by the timers, due `now` (0 when the caller has none: at
-- once), unless promote released it: promote gives it its turn (lib/rate.lua,
-- rate_at set).  Returns the stream entry's id, nil when it went by the timers.
local function make_ready(ti, iid, queue, tenant, priority, now)
  local r = redis.call('HMGET', ti, 'rate_ms', 'rate_at')
  if r[1] and not r[2] then
    redis.call('ZADD', key_timers(), now or 0, iid)
    return redis.call('HSET', ti, 'state', 'scheduled', 'loc', 'timer', 'due', now or 0) and nil
  end
  local eid = stream_add(key_q(queue, tenant, priority), iid)
  redis.call('HSET', ti, 'state', 'ready', 'loc', 'q:' .. eid)
  -- a retry's or countdown's due (absent reads as none); a run task's deps_left,
  -- 0 once it is ready (absent reads TI_DEFAULT_DEPS_LEFT): in the same call
  redis.call('HDEL', ti, 'due', 'deps_left', 'rate_at')
  ring_add(key_ring(queue, priority), tenant)
  note_oldest(queue, priority, tenant, eid)
  return eid
end

