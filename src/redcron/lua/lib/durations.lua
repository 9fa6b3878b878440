--[[ durations: how long attempts and runs took, as histograms per tenant and task
  (job) name for /metrics; bucket bounds from redcron/keys.py (DURATION_BUCKETS).
  durations:<tenant> (HASH, lifetime): task:<task name>|<le> -> attempts in that
  bucket (not cumulative), task:<task name>|sum_ms -> their total ms, task:#names
  -> names held; job:... the same for the tenant's runs, per job name.
  Each kind holds at most DURATION_NAMES names: later ones count as DURATION_OTHER,
  so a tenant's series stay bounded whatever it names its tasks.
  An attempt is timed from its start (from its lease when it ended before its
  start was marked) to its end, by the script that ends it (the follow-up row
  carries the ms); a run from its start (else its creation) to its end; server
  clock.  A call gathers what ended (dur_note) and writes it once
  (dur_save): a batch costs a call per name and bucket, not per attempt. ]]

-- The field name of the bucket `ms` falls in.
local function dur_bucket(ms)
  for _, b in ipairs(DURATION_BUCKETS) do
    if ms <= b[1] then return b[2] end
  end
  return '+Inf'  -- not reached: the last bound is math.huge
end

-- Gather one duration of `tenant`'s `name`, from `began` (ms, or nil: not timed) to `now`.
local function dur_note(notes, tenant, name, began, now)
  began = tonumber(began or '')
  if not name or not began or not tenant then return end
  local ms = now - began
  if ms < 0 then ms = 0 end
  local mine = notes[tenant] or {}
  notes[tenant] = mine
  local d = mine[name] or {sum = 0, le = {}}
  mine[name] = d
  d.sum = d.sum + ms
  local le = dur_bucket(ms)
  d.le[le] = (d.le[le] or 0) + 1
end

-- Gather one attempt of `tenant`'s task `name` that took `ms` (-1: not timed).
local function dur_note_ms(notes, tenant, name, ms)
  if ms and ms >= 0 and name ~= '' then dur_note(notes, tenant, name, 0, ms) end
end

-- The name `name` counts under in hash `key`, among the names of prefix `pre`
-- (task: or job:): itself if held, or admitted while fewer than DURATION_NAMES
-- are; else DURATION_OTHER.
local function dur_admit(key, pre, name)
  if name == DURATION_OTHER or redis.call('HEXISTS', key, pre .. name .. '|sum_ms') == 1 then
    return name
  end
  if tonumber(redis.call('HGET', key, pre .. '#names') or '0') >= DURATION_NAMES then
    return DURATION_OTHER
  end
  redis.call('HINCRBY', key, pre .. '#names', 1)
  return name
end

-- Write the gathered durations into each tenant's durations hash, under the
-- prefix `pre` (DURATIONS.task or DURATIONS.job).
local function dur_save(notes, pre)
  for tenant, names in pairs(notes) do
    local key = key_durations(tenant)
    for name, d in pairs(names) do
      local as = pre .. dur_admit(key, pre, name)
      for le, n in pairs(d.le) do redis.call('HINCRBY', key, as .. '|' .. le, n) end
      redis.call('HINCRBY', key, as .. '|sum_ms', d.sum)
    end
  end
end

-- The run of hash `rk`, of `tenant`, ended at `now`.
local function dur_run(rk, tenant, now)
  local f = redis.call('HMGET', rk, 'job_name', 'started', 'created')
  local notes = {}
  dur_note(notes, tenant, f[1], f[2] or f[3], now)
  dur_save(notes, DURATIONS.job)
end
