--[[ runs: DAG progress and the end of a run, the part an invariant needs.
  Instance fields of a run's task: run, task, deps, down (comma lists),
  deps_left.  Run hash counters: total, n_done, n_succeeded, n_failed,
  n_cancelled (one at 0 is absent: reads 0); a run ends when n_done == total:
  its state and end are written, its deadline disarmed (lib/deadlines.lua) and
  it leaves its job's active runs (overlap policies read them).  What reacts
  to that end is a follow-up (lib/followup.lua, row runs: follow_runs.lua):
  the run's count and duration, the run_failed event, consecutive failures,
  retention, job chaining and a buffered fire.
  A mapped task (field map_over, issue 32 §2) goes from pending to mapping
  when its dependencies succeed, and a follow-up (row map: map_expand.lua)
  makes its instances <task>[0], <task>[1]...: map_n of them, map_done ended,
  map_ok succeeded; it ends with the last of them, succeeded when all did. ]]
-- @include lib/lists.lua
-- @include lib/downstream.lua
-- @include lib/rings.lua
-- @include lib/waiters.lua
-- @include lib/deadlines.lua
-- @include lib/followup.lua
-- @include lib/wake.lua

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
  -- a run hash names its job no more: the id does
  redis.call('SREM', key_active(f[RUN_END_JOB] or job_of_run(run_id)), run_id)
  follow('runs', {run_id, state, f[RUN_END_TENANT] or ''})
end

-- An instance reached a state its run counts as ended (succeeded, dead,
-- cancelled): move the run on (a no-op for a task outside a run).
local function run_task_ended(ti, iid, state, now)
  local run_id, task = run_of_task(iid)  -- the id says it (the hash no longer does)
  if not run_id then return end
  local down = redis.call('HGET', ti, 'down')
  -- a circuit-breaker trial that ends without succeeding (cancelled while
  -- ready or held, dead-lettered...) reopens its breaker: a follow-up
  if state ~= 'succeeded' then follow('left', {iid, state}) end
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
        local g = redis.call('HMGET', dti, 'state', 'queue', 'tenant', 'priority', 'map_over')
        if g[1] == 'pending' and g[5] then  -- mapped: a follow-up makes its instances
          redis.call('HSET', dti, 'state', 'mapping')
          follow('map', {did})
        elseif g[1] == 'pending' then
          make_ready(dti, did, g[2], g[3], g[4], now)
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
  local node = string.match(task, MAPPED)
  if node then  -- an instance of a mapped task: the task ends with the last of them
    local pid = run_id .. '/' .. node
    local pk = key_ti(pid)
    local ok = redis.call('HINCRBY', pk, 'map_ok', state == 'succeeded' and 1 or 0)
    local p = redis.call('HMGET', pk, 'state', 'map_n')
    if redis.call('HINCRBY', pk, 'map_done', 1) == tonumber(p[2]) and p[1] == 'mapping' then
      local pstate = ok == tonumber(p[2]) and 'succeeded' or state == 'cancelled' and state
        or 'failed'
      redis.call('HSET', pk, 'state', pstate, 'ended', now)
      notify_done(pk, pid)
      return run_task_ended(pk, pid, pstate, now)
    end
  end
  run_check_end(run_id, now)
end
