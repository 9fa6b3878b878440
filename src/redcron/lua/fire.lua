--[[ fire: turn one fire time of a job into a run, and store the next fire time.
  KEYS[1] shard prefix
  ARGV[1] job_id
  ARGV[2] expected due score in the schedule ("" = not from the schedule: manual/API)
  ARGV[3] job version the caller computed with ("" = any)
  ARGV[4] nominal fire time, ms (the run id is derived from it; "" = now, manual runs)
  ARGV[5] next nominal fire time, ms ("" = none: the job leaves the schedule)
  ARGV[6] next due score, ms (next nominal + jitter)
  ARGV[7] owner epoch of the calling beat ("" = not a beat)
  ARGV[8] trigger: cron | catchup | manual, or skip (advance the schedule and count
          the missed fires, create nothing: catch-up policy none)
  ARGV[9] now_override_ms ("" = server TIME)
  ARGV[10] missed fires skipped by the catch-up policy (counted)
  ARGV[11] run id
  ARGV[12] params (JSON text, manual runs)
  Returns: {status, run_id}: created | skipped (overlap: a 'skipped' run record
  without instances; buffer_one keeps the first fire held back and skips later
  ones) | buffered (buffer_one: the run starts when the active runs end) | exists
  | skipped_all (trigger skip) | stale (the score moved: someone fired already) |
  version (job changed: recompute) | paused
  Errors: STALE (the beat's shard lease was taken over), NOTFOUND.
  Upholds: invariant 1 (compare-and-set on owner epoch, schedule score and job
  version; run id from job id + nominal fire time; run and next fire time
  written together), invariant 2 (skipped fires counted). ]]
-- @include lib/common.lua

local job_id, expected, version = ARGV[1], ARGV[2], ARGV[3]
local fire_ms, next_nominal, next_due = ARGV[4], ARGV[5], ARGV[6]
local epoch, trigger, run_id = ARGV[7], ARGV[8], ARGV[11]
local now = now_ms(ARGV[9])
if fire_ms == '' then fire_ms = tostring(now) end
local jk = key_job(job_id)

-- checks before writes
if epoch ~= '' then
  local b = redis.call('HMGET', key_beat(), 'epoch', 'expiry')
  if b[1] ~= epoch or tonumber(b[2] or '0') <= now then
    return err('STALE', 'shard lease lost (epoch ' .. epoch .. ' is not the owner)')
  end
end
local j = redis.call('HMGET', jk, 'version', 'paused', 'overlap')
if not j[1] then return err('NOTFOUND', 'no job ' .. job_id) end
if version ~= '' and version ~= j[1] then return {'version', ''} end
if expected ~= '' then
  local score = redis.call('ZSCORE', key_schedule(), job_id)
  if not score or tonumber(score) ~= tonumber(expected) then return {'stale', ''} end
end
if j[2] == '1' and trigger ~= 'manual' then return {'paused', ''} end

-- the schedule moves in the same step as the run is created
if expected ~= '' then
  if next_nominal ~= '' then
    redis.call('ZADD', key_schedule(), next_due, job_id)
    redis.call('HSET', jk, 'next_fire', next_nominal)
  else
    redis.call('ZREM', key_schedule(), job_id)
    redis.call('HSET', jk, 'next_fire', '')
  end
end
local skipped = tonumber(ARGV[10] or '0') or 0
if skipped > 0 then
  redis.call('HINCRBY', key_stats(), 'fires_skipped', skipped)
  redis.call('HINCRBY', jk, 'fires_skipped', skipped)
end
if trigger == 'skip' then return {'skipped_all', ''} end
-- a fire replayed for a run that exists (the schedule moved on above) is not a new fire
if redis.call('EXISTS', key_run(run_id)) == 1 then return {'exists', run_id} end
redis.call('HSET', jk, 'last_fire', fire_ms)
redis.call('HINCRBY', key_stats(), 'fires', 1)

local overlap = j[3] or 'skip'
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
    for _, rid in ipairs(redis.call('SMEMBERS', key_active(job_id))) do
      local rk = key_run(rid)
      redis.call('HSET', rk, 'cancel_requested', '1')
      for _, t in ipairs(split(redis.call('HGET', rk, 'tasks'))) do
        cancel_instance(rid .. '/' .. t, now)
      end
    end
  end
end
create_run(job_id, run_id, tonumber(fire_ms), trigger, now, ARGV[12])
return {'created', run_id}
