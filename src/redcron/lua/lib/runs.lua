--[[ runs: DAG progress and the end of a run.
  Instance fields of a run's task: run, task, deps, down (comma lists),
  deps_left.  Run hash counters: total, n_done, n_succeeded, n_failed,
  n_cancelled (one at 0 is absent: reads 0); a run ends when n_done == total.
  Every run that ends is counted (lib/outcomes.lua) and timed
  (lib/durations.lua); its retention starts then (lib/run_retention.lua), and a
  fire buffered behind it (overlap buffer_one) makes its run (lib/run_create.lua),
  and its deadline is disarmed (lib/deadlines.lua). ]]
-- @include lib/lists.lua
-- @include lib/downstream.lua
-- @include lib/rings.lua
-- @include lib/waiters.lua
-- @include lib/breaker.lua
-- @include lib/outcomes.lua
-- @include lib/durations.lua
-- @include lib/run_create.lua
-- @include lib/run_retention.lua
-- @include lib/chain.lua
-- @include lib/deadlines.lua
-- @include lib/events.lua

local function run_check_end(run_id, now)
  local rk = key_run(run_id)
  local f = read_run_end(rk)
  local total = f[RUN_END_TOTAL]
  -- a counter at 0 is not in the hash (run_create)
  if not total or tonumber(f[RUN_END_N_DONE] or '0') < tonumber(total) then return end
  if not RUN_ACTIVE[f[RUN_END_STATE]] then return end
  local state = 'succeeded'
  if f[RUN_END_CANCEL_REQUESTED] == '1' then
    state = 'cancelled'
  elseif tonumber(f[RUN_END_N_FAILED] or '0') > 0 then
    state = 'failed'
  elseif tonumber(f[RUN_END_N_CANCELLED] or '0') > 0 then
    state = 'cancelled'
  end
  redis.call('HSET', rk, 'state', state, 'ended', now)
  deadline_disarm(run_id, f[RUN_END_DEADLINE])
  count_run(f[RUN_END_TENANT], state)
  dur_run(rk, f[RUN_END_TENANT], now)
  local job_id = f[RUN_END_JOB] or job_of_run(run_id)  -- a run hash names its job no more
  if state == 'failed' then
    event_add('run_failed', f[RUN_END_TENANT], job_id, run_id, now,
      (f[RUN_END_N_FAILED] or '0') .. ' of ' .. total .. ' task(s) failed')
  end
  redis.call('SREM', key_active(job_id), run_id)
  local jk = key_job(job_id)
  if redis.call('EXISTS', jk) == 1 then
    if state == 'failed' then
      local n = redis.call('HINCRBY', jk, 'consecutive_failures', 1)
      local limit = tonumber(redis.call('HGET', jk, 'pause_after_failures') or '0')
      if limit and limit > 0 and n >= limit then
        redis.call('HSET', jk, 'paused', '1', 'paused_reason', n .. ' consecutive failed runs')
        redis.call('ZREM', key_schedule(), job_id)
      end
    elseif state == 'succeeded' then
      redis.call('HSET', jk, 'consecutive_failures', 0)
      chain_upstream_succeeded(job_id, now)  -- jobs that depend on this one (lib/chain.lua)
    end
    -- buffer_one: the fire held back while runs were going starts now, unless
    -- the job was paused meanwhile (a paused job takes no scheduled fires)
    local buffered = redis.call('HGET', jk, 'buffered')
    if buffered and buffered ~= '' and redis.call('SCARD', key_active(job_id)) == 0 then
      redis.call('HSET', jk, 'buffered', '')
      local fire_ms, trig = string.match(buffered, '^(%d+)|(.*)$')
      local rid = make_run_id(job_id, fire_ms)
      if redis.call('EXISTS', key_run(rid)) == 0 then
        if redis.call('HGET', jk, 'paused') == '1' then
          record_skipped(job_id, rid, tonumber(fire_ms), trig, now, 'buffered fire: job paused')
        else
          create_run(job_id, rid, tonumber(fire_ms), trig, now, '')
        end
      end
    end
  end
  run_retain(rk, run_id, job_id)
end

-- An instance reached a state its run counts as ended (succeeded, dead,
-- cancelled): move the run on (a no-op for a task outside a run).
local function run_task_ended(ti, iid, state, now)
  local run_id = run_of_task(iid)  -- the id says it (the hash no longer does)
  if not run_id then return end
  local down = redis.call('HGET', ti, 'down')
  -- a circuit-breaker trial that ends without succeeding (cancelled while
  -- ready or held, dead-lettered...) reopens its breaker (a no-op otherwise)
  if state ~= 'succeeded' then breaker_trial_ended(iid, run_id, now, 'ended ' .. state, false) end
  local rk = key_run(run_id)
  redis.call('HINCRBY', rk, 'n_done', 1)
  if state == 'succeeded' then
    redis.call('HINCRBY', rk, 'n_succeeded', 1)
    -- fan-out / fan-in: a downstream task is made ready once, when its last
    -- dependency succeeds (scripts are serialized, so parents cannot race)
    for _, d in ipairs(split(down)) do
      local did = run_id .. '/' .. d
      local dti = key_ti(did)
      if redis.call('HINCRBY', dti, 'deps_left', -1) <= 0 then
        local g = redis.call('HMGET', dti, 'state', 'queue', 'tenant', 'priority')
        if g[1] == 'pending' then
          make_ready(dti, did, g[2], g[3], g[4])
          wake(g[2], 1)
        end
      end
    end
  else
    local mark = 'upstream_failed'
    if state == 'cancelled' then
      redis.call('HINCRBY', rk, 'n_cancelled', 1)
      mark = 'cancelled'
    else
      redis.call('HINCRBY', rk, 'n_failed', 1)
    end
    -- the transitive downstream can never run; independent branches go on
    walk_downstream(run_id, down, function(dti, did)
      local g = redis.call('HMGET', dti, 'state', 'down')
      if g[1] ~= 'pending' then return nil end
      redis.call('HSET', dti, 'state', mark, 'ended', now)
      notify_done(dti, did)  -- terminal too: result() waiters must not wait forever
      redis.call('HINCRBY', rk, 'n_done', 1)
      redis.call('HINCRBY', rk, mark == 'cancelled' and 'n_cancelled' or 'n_failed', 1)
      return g[2]
    end)
  end
  run_check_end(run_id, now)
end
