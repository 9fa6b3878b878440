--[[ follow_ends: apply follow-ups of kind ends (lib/followup.lua): what reacts
  to ended attempts, dead-lettered instances and scheduled fires.
  KEYS[1] shard prefix
  ARGV[1] metrics: full | basic (basic: no per-minute figures in minute:<minute>)
  ARGV[2..] ids of entries of the shard's followups stream, oldest first
  Returns: the number of entries applied (an id gone or of another kind: 0).
  Per entry, at the time of the end (its field at): attempts are counted
  (lib/outcomes.lua) and, when they succeeded, failed or timed out, timed
  (lib/durations.lua: the row carries the ms, so no instance is read); an attempt of a run's task tells its job's circuit breaker
  (lib/breaker.lua), in order; a run's task ended otherwise (left) ends a
  breaker trial it was; a dead-lettered instance is counted (counters dead) and
  recorded as a dead_lettered event; a scheduled fire goes into the trigger-lag
  histograms and may record a trigger_lag event (lib/events.lua).  Counts of
  one call are summed before they are written.
  Upholds: each follow-up applied once (read, applied and deleted in one call). ]]
-- @include lib/outcomes.lua
-- @include lib/durations.lua
-- @include lib/lag.lua
-- @include lib/breaker.lua
-- @include lib/events.lua
-- @include lib/followed.lua

local full = ARGV[1] ~= 'basic'
-- the outcomes whose attempts are timed: a lost attempt's end is when its lease
-- was found expired, a cancelled one's when it was stopped
local TIMED = {succeeded = 1, failed = 1, timed_out = 1}

local counts = {}  -- "<minute>|<tenant>|<outcome>|<active>" -> attempts
local durations = {}  -- lib/durations.lua's notes
local lags = {}  -- minute -> lib/lag.lua's notes
local stats = {}  -- stats field -> n
local function add(t, k, n) t[k] = (t[k] or 0) + n end

local applied = follow_entries('ends', 2, function(e)
  local at = e.at
  local minute = math.floor(at / 60000)
  for _, r in ipairs(e.attempts or {}) do
    local iid, outcome, tenant, handed_back, counter = r[1], r[3], r[4], r[5], r[6]
    add(counts, minute .. '|' .. tenant .. '|' .. outcome .. '|' .. handed_back, 1)
    if counter ~= '' then add(stats, counter, 1) end
    -- r[7], r[8]: the task name and the ms it took (rows of an older release
    -- have neither: not timed)
    if TIMED[outcome] then dur_note_ms(durations, tenant, r[7] or '', r[8]) end
    local run = run_of_task(iid)
    if run then
      breaker_attempt_ended(iid, run, outcome, handed_back == 1 and 'handed_back' or nil, at)
    end
  end
  for _, r in ipairs(e.left or {}) do
    local run = run_of_task(r[1])
    if run then breaker_trial_ended(r[1], run, at, 'ended ' .. r[2], false) end
  end
  for _, r in ipairs(e.dead or {}) do
    local iid, tenant, name, outcome, errtext = r[1], r[2], r[3], r[4], r[5]
    add(stats, 'dead', 1)
    -- the notifier turns these into one digest per channel per minute
    local run_id = run_of_task(iid) or ''
    event_add('dead_lettered', tenant, job_of_run(run_id) or '', run_id, at,
      cjson.encode({task = iid, name = name, outcome = outcome, error = errtext}))
  end
  for _, r in ipairs(e.fires or {}) do
    local tenant, job_id, run_id, late = r[1], r[2], r[3], r[4]
    lags[minute] = lags[minute] or {}
    lag_note(lags[minute], tenant, late)
    event_lag(tenant, job_id, run_id, late, at)
  end
end)

for k, n in pairs(counts) do
  local minute, tenant, outcome, handed_back = string.match(k, '^(%d+)|(.*)|([%w_]+)|(%d)$')
  count_attempts(tenant, outcome, n, tonumber(minute) * 60000, full and handed_back == '0')
end
for field, n in pairs(stats) do redis.call('HINCRBY', key_counters(), field, n) end
dur_save(durations, DURATIONS.task)
for minute, notes in pairs(lags) do lag_save(notes, minute * 60000, not full) end
return applied
