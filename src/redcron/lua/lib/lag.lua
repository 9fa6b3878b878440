--[[ lag: how late scheduled fires are (trigger lag), as histograms whose bucket
  bounds come from redcron/keys.py (LAG_BUCKETS: {bound ms, field name}).
  counters (HASH, lifetime), fields lag:<le> -> fires in that bucket (not
  cumulative), lag:sum_ms, lag:count.
  minute:<minute> (HASH, per minute, expires after ACTIVITY_TTL_S), fields
  lag:<tenant>|<le> -> fires, and lag:*|<le>: the same summed over tenants.
  A call gathers its fires in a table (lag_note) and writes them once (lag_save),
  so a batch of fires costs a few calls, not a few per fire.  A fire late
  past EVENT_LAG_MS records a trigger_lag event (event_lag). ]]
-- @include lib/events.lua

-- The field name of the bucket a lag (ms) falls in.
local function lag_bucket(lag_ms)
  for _, b in ipairs(LAG_BUCKETS) do
    if lag_ms <= b[1] then return b[2] end
  end
  return '+Inf'  -- not reached: the last bound is math.huge
end

-- Gather one scheduled fire of `tenant`, `lag_ms` late, into `notes`.
local function lag_note(notes, tenant, lag_ms)
  if lag_ms < 0 then lag_ms = 0 end
  local le = lag_bucket(lag_ms)
  notes.count = (notes.count or 0) + 1
  notes.sum = (notes.sum or 0) + lag_ms
  notes.le = notes.le or {}
  notes.le[le] = (notes.le[le] or 0) + 1
  notes.tle = notes.tle or {}
  local f = tenant .. '|' .. le
  notes.tle[f] = (notes.tle[f] or 0) + 1
end

-- Write the gathered fires: the lifetime histogram, and the minute's of `now`
-- unless `lifetime_only` (metrics = basic).
local function lag_save(notes, now, lifetime_only)
  if not notes.count then return end
  local lk, pre = key_counters(), COUNTERS.lag
  for le, n in pairs(notes.le) do redis.call('HINCRBY', lk, pre .. le, n) end
  redis.call('HINCRBY', lk, pre .. 'count', notes.count)
  redis.call('HINCRBY', lk, pre .. 'sum_ms', notes.sum)
  if lifetime_only then return end
  local mk, mpre = key_minute(math.floor(now / 60000)), MINUTE.lag
  local fresh = false
  for f, n in pairs(notes.tle) do
    if redis.call('HINCRBY', mk, mpre .. f, n) == n then fresh = true end
  end
  -- every tenant's, summed ('*' is no tenant name): the overview reads these
  for le, n in pairs(notes.le) do redis.call('HINCRBY', mk, mpre .. '*|' .. le, n) end
  if fresh then redis.call('EXPIRE', mk, ACTIVITY_TTL_S) end
end

-- A scheduled fire `lag_ms` late: a trigger_lag event past EVENT_LAG_MS, at most
-- one per job per EVENT_LAG_EVERY_MS (the job hash's lag_alert_at: when the last
-- one was recorded, ms), so a stalled shard catching up on thousands of fires
-- records one event per job, not thousands.  A job deleted since records none
-- (and its hash is not made again by the field).
local function event_lag(tenant, job_id, run_id, lag_ms, now)
  if lag_ms < EVENT_LAG_MS then return end
  local jk = key_job(job_id)
  local j = redis.call('HMGET', jk, 'tenant', 'lag_alert_at')
  if not j[1] then return end
  local last = tonumber(j[2] or '')
  if last and now - last < EVENT_LAG_EVERY_MS then return end
  redis.call('HSET', jk, 'lag_alert_at', now)
  event_add('trigger_lag', tenant, job_id, run_id, now,
    'fired ' .. math.floor(lag_ms / 1000) .. ' s late')
end
