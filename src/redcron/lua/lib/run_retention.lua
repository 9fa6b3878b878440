--[[ run_retention: what is kept of a run once it ends.  Its hash and its
  instances expire after the run's keep_s; the job's history (runs:<job>)
  keeps at most the job's keep_runs runs; a run with tasks in the DLQ is held
  (dlq_held) until the last of them leaves it. ]]
-- @include lib/mapped.lua

-- Runs the keep_runs trimming may skip (active, or held for the DLQ: below)
-- looking for ones to delete, oldest first: a bound on the work of one call.
local TRIM_LOOK_PAST = 100

-- Once a run ends, it and its instances expire after keep_s, and the job's
-- history keeps at most keep_runs runs (oldest ended runs deleted, ≤ 10 a call).
-- A run with tasks in the DLQ is held: it and all its instances keep no TTL,
-- trimming skips it and (as far as it looks) does not count it against
-- keep_runs (dlq_held = how many of its tasks are dead), because a
-- replay reopens the run and reads its upstream's records; its retention
-- starts when the last of them leaves the DLQ (run_dlq_left) or it ends again
-- after a replay.  Only a run that counted a failure can hold dead tasks.
-- Runs gone with their retention (keep_s) leave their entries behind in the
-- indexes that list them by time (the job's history, the shard's runidx, the
-- tenant's truns): each run end drops up to two such entries from the oldest end
-- of each, which keeps up with the one entry a run adds while the runs of an
-- index share a retention (an index under its cap never trims; one whose oldest
-- run outlives the ones after it waits for it, bounded by the cap).
local function drop_gone_oldest(index)
  for _, rid in ipairs(redis.call('ZRANGE', index, 0, 1)) do
    if redis.call('EXISTS', key_run(rid)) == 1 then break end
    redis.call('ZREM', index, rid)
  end
end

local function run_retain(rk, run_id, job_id)
  local f = redis.call('HMGET', rk, 'tasks', 'keep_s', 'n_failed', 'tenant')
  local iids = run_iids(run_id, f[1])  -- a mapped task's instances too
  local dead = 0
  if tonumber(f[3] or '0') ~= 0 then
    for _, iid in ipairs(iids) do
      if redis.call('HGET', key_ti(iid), 'state') == 'dead' then dead = dead + 1 end
    end
  end
  if dead > 0 then
    redis.call('HSET', rk, 'dlq_held', dead)
  else
    redis.call('HDEL', rk, 'dlq_held')
    local ttl = tonumber(f[2] or '0')
    if ttl and ttl > 0 then
      redis.call('EXPIRE', rk, ttl)
      for _, iid in ipairs(iids) do redis.call('EXPIRE', key_ti(iid), ttl) end
    end
  end
  local keep = tonumber(redis.call('HGET', key_job(job_id), 'keep_runs') or JOB_DEFAULT_KEEP_RUNS)
  local hist = key_runs(job_id)
  if keep and keep > 0 then
    local excess = math.min(redis.call('ZCARD', hist) - keep, 10)
    -- oldest first; what cannot go (active, held) is skipped, the ranks after
    -- it read next (at most TRIM_LOOK_PAST skipped)
    local skipped = 0
    while excess > 0 and skipped < TRIM_LOOK_PAST do
      local page = redis.call('ZRANGE', hist, skipped, skipped + excess - 1)
      if #page == 0 then break end
      for _, rid in ipairs(page) do
        local ork = key_run(rid)
        local o = redis.call('HMGET', ork, 'state', 'dlq_held', 'tasks', 'tenant')
        if not o[1] then
          -- expired with its retention: only its history entry was left
          redis.call('ZREM', hist, rid)
          excess = excess - 1
        elseif tonumber(o[2] or '0') > 0 then
          -- held for the DLQ: kept, and not counted against keep_runs
          skipped = skipped + 1
          excess = excess - 1
        elseif RUN_TERMINAL[o[1]] then
          for _, iid in ipairs(run_iids(rid, o[3])) do redis.call('DEL', key_ti(iid)) end
          redis.call('DEL', ork)
          redis.call('ZREM', hist, rid)
          redis.call('ZREM', key_runidx(), rid)
          if o[4] then redis.call('ZREM', key_truns(o[4]), rid) end
          excess = excess - 1
        else
          skipped = skipped + 1
        end
      end
    end
  end
  drop_gone_oldest(hist)
  drop_gone_oldest(key_runidx())
  if f[4] then drop_gone_oldest(key_truns(f[4])) end
end

-- A dead task of a run left the DLQ for good (discarded): when the run has
-- ended and none of its tasks is left there, its retention starts.
local function run_dlq_left(run_id)
  local rk = key_run(run_id)
  local f = redis.call('HMGET', rk, 'state', 'job', 'dlq_held')
  -- not held: active (retained when it ends), or its retention already started
  if not f[3] or RUN_ACTIVE[f[1]] then return end
  if redis.call('HINCRBY', rk, 'dlq_held', -1) <= 0 then
    run_retain(rk, run_id, f[2] or job_of_run(run_id))
  end
end
