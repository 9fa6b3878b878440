--[[ deadline_sweep: mark late the runs whose deadline passed while they were
  still going (docs/operations.md "Deadlines").
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] limit: due deadlines looked at in this call (the beat passes <= 500)
  Returns: {looked, {run_id, tenant, job_name, scheduled_for, deadline}, ...}:
  looked = due entries taken off the index (a caller that got `limit` calls
  again: more may be due), then one row per run this call marked late.
  Each due entry of deadlines leaves it.  Its run, if it has not ended and
  holds no `late` yet, gets `late` = now, the lifetime counters fields
  late:<tenant> and late:* (every tenant's) +1, and a run_late entry in the events
  stream: type, tenant, job (the job id, as breaker events), job_name, run,
  at (now, ms), detail ("deadline 300s after 2026-12-01T10:00:00Z", the
  nominal fire time in UTC).  A run whose hash is gone, is no hash, or that
  ended (its end removes the entry; one left by hand) is only dropped from
  the index.
  Upholds: a run is marked late at most once (its entry leaves the index in
  the call that marks it, and `late` is checked first), and only while it
  has not ended; every key is the shard's (one slot). ]]
-- @include lib/clock.lua

local now = now_ms(ARGV[1])
local limit = tonumber(ARGV[2])

-- "2026-12-01T10:00:00Z" of a time in ms (days to civil date: H. Hinnant's
-- algorithm; Redis's Lua has no os.date)
local function iso_utc(ms)
  local s = math.floor(ms / 1000)
  local days = math.floor(s / 86400)
  local secs = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  return string.format('%04d-%02d-%02dT%02d:%02d:%02dZ', y, m, d, math.floor(secs / 3600),
    math.floor(secs % 3600 / 60), secs % 60)
end

local index = key_deadlines()
local due = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
local out = {0}
for i = 1, #due, 2 do
  local run_id, deadline = due[i], tonumber(due[i + 1])
  local rk = key_run(run_id)
  -- pcall: a run key that is no hash (a hand edit) is dropped like a gone
  -- run, not an error that would stop every later deadline of the shard
  local r = redis.pcall('HMGET', rk, 'state', 'late', 'tenant', 'job_name', 'scheduled_for')
  redis.call('ZREM', index, run_id)
  out[1] = out[1] + 1
  if not r.err and r[1] and RUN_ACTIVE[r[1]] and not r[2] then
    local tenant, job_name = r[3] or '', r[4] or ''
    local fire_ms = tonumber(r[5] or '') or deadline
    redis.call('HSET', rk, 'late', now)
    local lk = key_counters()
    redis.call('HINCRBY', lk, COUNTERS.late .. tenant, 1)
    redis.call('HINCRBY', lk, COUNTERS.late .. '*', 1)  -- no tenant is named '*'
    local detail = string.format('deadline %ss after %s', string.format('%g',
      (deadline - fire_ms) / 1000), iso_utc(fire_ms))
    -- lib/events.lua's shape and retention (EVENTS_MAX), with the job's name besides
    redis.call('XADD', key_events(), 'MAXLEN', '~', EVENTS_MAX, '*', 'type', 'run_late',
      'tenant', tenant, 'job', job_of_run(run_id) or '', 'job_name', job_name, 'run', run_id,
      'at', now, 'detail', detail)
    out[#out + 1] = {run_id, tenant, job_name, fire_ms, deadline}
  end
end
return out
