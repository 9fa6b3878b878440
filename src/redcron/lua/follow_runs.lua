--[[ follow_runs: apply follow-ups of kind runs (lib/followup.lua): what reacts
  to the end of a run.
  KEYS[1] shard prefix
  ARGV[1..] ids of entries of the shard's followups stream, oldest first
  Returns: the number of entries applied (an id gone or of another kind: 0).
  Per run that ended, at the time of its end (the entry's at): it is counted
  (lib/outcomes.lua) and timed (lib/durations.lua); a failed run records a
  run_failed event; its job's consecutive failed runs are counted, and the job
  paused at its pause_after_failures; its retention starts
  (lib/run_retention.lua) unless a retry reopened it meanwhile (it starts at
  its next end); and when another job may follow from it (job chaining, a
  fire buffered behind it) a follow-up of kind chain is written
  (follow_chain.lua).  A row dlq_left (a dead task of an ended run left the
  DLQ for good) starts the run's retention when none of its tasks is left there.
  Upholds: each follow-up applied once (read, applied and deleted in one call). ]]
-- @include lib/outcomes.lua
-- @include lib/durations.lua
-- @include lib/events.lua
-- @include lib/run_retention.lua
-- @include lib/followed.lua
-- @include lib/followup.lua

-- The run `run_id` of `tenant` ended `state` at `at`.
local function run_ended(run_id, state, tenant, at)
  local rk = key_run(run_id)
  local job_id = job_of_run(run_id)
  count_run(tenant, state)
  dur_run(rk, tenant, at)
  local r = redis.call('HMGET', rk, 'state', 'n_failed', 'total', 'job')
  job_id = r[4] or job_id  -- hashes of an older version name their job
  if state == 'failed' then
    event_add('run_failed', tenant, job_id, run_id, at,
      (r[2] or '0') .. ' of ' .. (r[3] or '0') .. ' task(s) failed')
  end
  local jk = key_job(job_id)
  local j = redis.call('HMGET', jk, 'tenant', 'name', 'buffered', 'pause_after_failures',
    'chain_down')
  if j[1] then
    if state == 'failed' then
      local n = redis.call('HINCRBY', jk, 'consecutive_failures', 1)
      local limit = tonumber(j[4] or JOB_DEFAULT_PAUSE_AFTER_FAILURES)
      if limit and limit > 0 and n >= limit then
        redis.call('HSET', jk, 'paused', '1', 'paused_reason', n .. ' consecutive failed runs')
        redis.call('ZREM', key_schedule(), job_id)
      end
    elseif state == 'succeeded' then
      redis.call('HDEL', jk, 'consecutive_failures')  -- absent: 0
    end
    -- job chaining (a job names this one in depends_on) or a buffered fire
    local chained = state == 'succeeded' and j[5] and j[5] ~= ''
    if chained or (j[3] and j[3] ~= '') then follow('chain', {job_id, state}) end
  end
  -- a run a retry reopened meanwhile starts its retention at its next end
  if r[1] and RUN_TERMINAL[r[1]] then run_retain(rk, run_id, job_id) end
end

local applied, last_at = follow_entries('runs', 1, function(e)
  for _, row in ipairs(e.runs or {}) do
    if row[2] == 'dlq_left' then
      run_dlq_left(row[1])
    else
      run_ended(row[1], row[2], row[3], e.at)
    end
  end
end)
follow_flush(last_at)
return applied
