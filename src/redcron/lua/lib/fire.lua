--[[ fire: one fire of a job, shared by fire.lua (one fire) and fire_batch.lua
  (many fires of one shard per call).  fire_rows() decodes the calls' rows
  (ARGV[3..], one msgpack map per fire, as fire.lua's header says) before
  anything is written; fire_one() takes one.  The caller checks the owner
  epoch first.  Returns {status,
  run_id}; status notfound for a missing job,
  {'malformed', reason} (nothing written) for a job hash no run can be made from.
  A new fire from the schedule (not manual) is a follow-up (lib/followup.lua,
  row fires: the trigger-lag histograms and the trigger_lag event), late by
  now - its due time, the later of its schedule score and its nominal time (a
  catch-up fire of an old score is as late as its own nominal time); the caller
  flushes the follow-ups once. ]]
-- @include lib/admission.lua
-- @include lib/run_create.lua
-- @include lib/template.lua
-- @include lib/chain_gate.lua
-- @include lib/followup.lua

-- Why a job hash cannot make a run (its template did not decode to rows of
-- {task, queue, deps}, or it names no tenant); nil: it can.
local function dag_malformed(decoded, rows, tenant)
  if not tenant or tenant == '' then return 'the job hash has no tenant' end
  if not decoded or type(rows) ~= 'table' or #rows == 0 then
    return 'the job hash has no readable template (DAG JSON)'
  end
  for _, row in ipairs(rows) do
    if type(row) ~= 'table' or type(row.task) ~= 'string' or type(row.queue) ~= 'string'
        or type(row.deps) ~= 'table' then
      return 'the job template has a malformed task row'
    end
  end
  return nil
end

-- Is `epoch` the shard's current, unexpired owner epoch? ("" = not a beat: yes)
local function owner_ok(epoch, now)
  if epoch == '' then return true end
  local o = redis.call('HMGET', key_maintenance(), MAINT.beat_epoch, MAINT.beat_expiry)
  return o[1] == epoch and tonumber(o[2] or '0') > now
end

-- The fires of ARGV[3..], each a table of its row's fields by name (a field
-- the row leaves out is ''); nil and why when a row is not a fire.
local FIRE_TEXT = {'job_id', 'expected', 'version', 'fire_ms', 'next_ms', 'next_due',
  'trigger', 'skipped', 'run_id', 'params', 'traceparent', 'tracestate'}
local function fire_rows()
  local fires = {}
  for i = 3, #ARGV do
    local ok, r = pcall(cmsgpack.unpack, ARGV[i])
    if not ok or type(r) ~= 'table' then return nil, 'fire row ' .. (i - 3) .. ' is not a msgpack map' end
    for _, f in ipairs(FIRE_TEXT) do
      local v = r[f]
      if v == nil then
        r[f] = ''
      elseif type(v) ~= 'string' then
        return nil, 'fire row ' .. (i - 3) .. ': ' .. f .. ' must be a string'
      end
    end
    fires[#fires + 1] = r
  end
  return fires
end

-- One fire (a table of fire_rows()).
local function fire_one(fire, now, woken)
  local job_id, expected, version = fire.job_id, fire.expected, fire.version
  local fire_ms, next_nominal, next_due = fire.fire_ms, fire.next_ms, fire.next_due
  local trigger, skipped, run_id, params = fire.trigger, fire.skipped, fire.run_id, fire.params
  if fire_ms == '' then fire_ms = tostring(now) end
  local jk = key_job(job_id)

  -- checks before writes (the owner epoch was checked by the calling script)
  local j = read_job_fire(jk)
  if not j[JOB_FIRE_VERSION] then return {'notfound', ''} end
  if version ~= '' and version ~= j[JOB_FIRE_VERSION] then return {'version', ''} end
  if expected ~= '' then
    local score = redis.call('ZSCORE', key_schedule(), job_id)
    if not score or tonumber(score) ~= tonumber(expected) then return {'stale', ''} end
  end
  if j[JOB_FIRE_PAUSED] == '1' and trigger ~= 'manual' then return {'paused', ''} end
  -- a hash edited by hand: refuse before the schedule moves (a Lua error
  -- half-way would lose this fire and fail every fire of the same call)
  local rows = template_rows(j[JOB_FIRE_TEMPLATE])
  local why = dag_malformed(rows ~= nil, rows, j[JOB_FIRE_TENANT])
  if why then return {'malformed', why} end

  -- the schedule moves in the same step as the run is created
  if expected ~= '' then
    if next_nominal ~= '' then
      redis.call('ZADD', key_schedule(), next_due, job_id)
    else
      redis.call('ZREM', key_schedule(), job_id)
    end
    if trigger == 'skip' then
      redis.call('HSET', jk, 'next_fire', next_nominal)
    else
      redis.call('HSET', jk, 'next_fire', next_nominal, 'last_fire', fire_ms)
    end
  end
  skipped = tonumber(skipped) or 0
  if skipped > 0 then
    redis.call('HINCRBY', key_counters(), 'fires_skipped', skipped)
    redis.call('HINCRBY', jk, 'fires_skipped', skipped)
  end
  if trigger == 'skip' then return {'skipped_all', ''} end
  -- a fire replayed for a run that exists (the schedule moved on above) is not a new fire
  if redis.call('EXISTS', key_run(run_id)) == 1 then return {'exists', run_id} end
  -- depends_on: a fire of the job's own trigger may wait for its upstream jobs
  local held = chain_gate(job_id, jk, j[JOB_FIRE_UPSTREAMS], fire_ms, trigger, run_id, now)
  if held then return held end
  if expected == '' then redis.call('HSET', jk, 'last_fire', fire_ms) end
  redis.call('HINCRBY', key_counters(), 'fires', 1)
  if expected ~= '' and trigger ~= 'manual' then
    local late = now - math.max(tonumber(expected), tonumber(fire_ms))
    follow('fires', {j[JOB_FIRE_TENANT], job_id, run_id, late})
  end

  local overlap = j[JOB_FIRE_OVERLAP] or JOB_DEFAULT_OVERLAP
  local active = redis.call('SCARD', key_active(job_id))
  if trigger ~= 'manual' and active > 0 then
    if overlap == 'skip' then
      -- recorded in the run history, never silently dropped
      record_skipped(job_id, run_id, tonumber(fire_ms), trigger, now,
        'overlap: previous run still going')
      return {'skipped', run_id}
    elseif overlap == 'buffer_one' then
      -- one fire waits for the active run; later ones are skipped (and recorded)
      local held = redis.call('HGET', jk, 'buffered')
      if held and held ~= '' then
        record_skipped(job_id, run_id, tonumber(fire_ms), trigger, now,
          'overlap: a fire is already buffered')
        return {'skipped', run_id}
      end
      redis.call('HSET', jk, 'buffered', fire_ms .. '|' .. trigger)
      return {'buffered', run_id}
    elseif overlap == 'cancel_previous' then
      -- marked now (the run ends cancelled whatever comes); its tasks are
      -- cancelled by a follow-up (follow_cancel.lua) within the maintenance delay
      for _, rid in ipairs(redis.call('SMEMBERS', key_active(job_id))) do
        redis.call('HSET', key_run(rid), 'cancel_requested', '1')
        follow('cancel', {rid})
      end
    end
  end
  -- admission: a run whose roots would push the tenant past max_queued is
  -- recorded as rejected (and counted), never dropped silently
  local max_queued, max_priority = admission(j[JOB_FIRE_TENANT])
  if max_queued > 0 then
    local roots = 0
    for _, row in ipairs(rows) do
      if #row.deps == 0 then roots = roots + 1 end
    end
    if queued_count(j[JOB_FIRE_TENANT]) + roots > max_queued then
      record_skipped(job_id, run_id, tonumber(fire_ms), trigger, now,
        'admission: tenant over max_queued', 'rejected')
      return {'rejected', run_id}
    end
  end
  create_run(job_id, run_id, tonumber(fire_ms), trigger, now, params,
    {tenant = j[JOB_FIRE_TENANT], name = j[JOB_FIRE_NAME], keep_s = j[JOB_FIRE_KEEP_S],
     deadline_ms = j[JOB_FIRE_DEADLINE_MS], max_priority = max_priority,
     rows = rows, traceparent = fire.traceparent, tracestate = fire.tracestate}, woken)
  return {'created', run_id}
end
