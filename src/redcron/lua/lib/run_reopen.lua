--[[ run_reopen: retry a run's failed tasks and reopen the run (run_retry.lua,
  and dlq_replay.lua for a run's task).  A reopened run's deadline is armed
  again while it is still ahead and the run was not late (lib/deadlines.lua):
  a run that ended before its deadline was not late then, however long a
  retry after it takes. ]]
-- @include lib/lists.lua
-- @include lib/mapped.lua
-- @include lib/deadlines.lua
-- @include lib/downstream.lua
-- @include lib/rings.lua
-- @include lib/wake.lua
-- @include lib/followup.lua

-- How many of a run task's dependencies have not succeeded (its deps_left).
local function unmet_deps(run_id, deps)
  local left = 0
  for _, dep in ipairs(deps) do
    if redis.call('HGET', key_ti(run_id .. '/' .. dep), 'state') ~= 'succeeded' then
      left = left + 1
    end
  end
  return left
end

-- What a task's failure marked downstream (never started) waits again: its
-- upstream_failed (or never-run cancelled) downstream goes back to pending.
local function reset_downstream(run_id, rk, down)
  walk_downstream(run_id, down, function(dti)
    local g = redis.call('HMGET', dti, 'state', 'down', 'deps')
    local never_ran = g[1] == 'cancelled' and redis.call('HGET', dti, 'attempt') == '0'
    if g[1] ~= 'upstream_failed' and not never_ran then return nil end
    local dleft = unmet_deps(run_id, split(g[3]))
    redis.call('PERSIST', dti)
    -- a run cancel marked it: once reset, its lease must not be revoked
    redis.call('HSET', dti, 'state', 'pending', 'ended', '', 'deps_left', dleft,
      'cancel_requested', '')
    redis.call('HINCRBY', rk, 'n_done', -1)
    redis.call('HINCRBY', rk, g[1] == 'cancelled' and 'n_cancelled' or 'n_failed', -1)
    return g[2]
  end)
end

-- A mapped task goes back to mapping (issue 32 §2): an instance of it is
-- retried (`child`: one of its ended instances no longer counts), or it is
-- retried itself.  An ended task is counted out of its run and its downstream
-- waits again.
local function map_reopen(run_id, rk, node, child)
  local pk = key_ti(run_id .. '/' .. node)
  if child then redis.call('HINCRBY', pk, 'map_done', -1) end
  local p = redis.call('HMGET', pk, 'state', 'down')
  if not TASK_TERMINAL[p[1]] then return end
  redis.call('HINCRBY', rk, 'n_done', -1)
  if p[1] ~= 'succeeded' then
    redis.call('HINCRBY', rk, p[1] == 'cancelled' and 'n_cancelled' or 'n_failed', -1)
  end
  redis.call('PERSIST', pk)
  redis.call('HSET', pk, 'state', 'mapping', 'ended', '', 'cancel_requested', '')
  reset_downstream(run_id, rk, p[2])
end

-- Retry a failed task of a run (also what DLQ replay does for run tasks):
-- ready again with a fresh budget, its upstream_failed/cancelled downstream
-- reset to pending, and the run reopened.  Returns true when it was retried.
-- A mapped task is retried through its instances (those not succeeded), or
-- mapped again when it made none; retrying an instance reopens its task.
local function retry_run_task(run_id, task, now)
  local iid = run_id .. '/' .. task
  local ti = key_ti(iid)
  local f = read_ti_retry(ti)
  local state = f[TI_RETRY_STATE]
  if state ~= 'dead' and state ~= 'cancelled' and state ~= 'upstream_failed'
    and state ~= 'failed' then return false end
  -- an upstream that failed (and is not retried itself) means it can never run:
  -- reopening the run for it would leave a run that nothing can progress
  local deps = split(redis.call('HGET', ti, 'deps'))
  for _, dep in ipairs(deps) do
    local st = redis.call('HGET', key_ti(run_id .. '/' .. dep), 'state')
    if not st or (TASK_TERMINAL[st] and st ~= 'succeeded') then return false end
  end
  local rk = key_run(run_id)
  local m = redis.call('HMGET', ti, 'map_over', 'map_n', 'map_made')
  local node = string.match(task, MAPPED)
  if m[1] then
    -- a mapped task: its instances are retried, or it is mapped again
    if tonumber(m[2] or '-1') == 0 or unmet_deps(run_id, deps) > 0 then return false end
    map_reopen(run_id, rk, task, false)
    redis.call('HDEL', ti, 'error')
    for i = 0, tonumber(m[3] or '0') - 1 do retry_run_task(run_id, task .. '[' .. i .. ']', now) end
    if tonumber(m[3] or '0') < tonumber(m[2] or '1') then follow('map', {iid}) end
  else
    local counter = state == 'cancelled' and 'n_cancelled' or 'n_failed'
    if state == 'dead' then
      redis.call('XDEL', key_dlq(f[TI_RETRY_TENANT]), string.sub(f[TI_RETRY_LOC], 5))
    end
    redis.call('HINCRBY', rk, 'n_done', -1)
    redis.call('HINCRBY', rk, counter, -1)
    redis.call('PERSIST', ti)
    redis.call('HSET', ti, 'budget', f[TI_RETRY_ATTEMPT], 'ended', '', 'cancel_requested', '')
    if node then map_reopen(run_id, rk, node, true) end
    -- a task whose own upstream is not done waits for it
    local left = unmet_deps(run_id, deps)
    redis.call('HSET', ti, 'deps_left', left)
    if left == 0 then
      make_ready(ti, iid, f[TI_RETRY_QUEUE], f[TI_RETRY_TENANT], f[TI_RETRY_PRIORITY], now)
      wake(f[TI_RETRY_QUEUE], 1)
    else
      redis.call('HSET', ti, 'state', 'pending', 'loc', '')
    end
    reset_downstream(run_id, rk, f[TI_RETRY_DOWN])
  end
  local r = redis.call('HMGET', rk, 'state', 'job', 'tasks', 'deadline', 'late')
  r[2] = r[2] or job_of_run(run_id)  -- the key names the job (older run hashes too)
  if not RUN_ACTIVE[r[1]] then
    local deadline = tonumber(r[4] or '')
    if deadline and deadline > now and not r[5] then deadline_arm(rk, run_id, deadline) end
    -- live again: its retention TTLs go, on every instance (a succeeded
    -- upstream's record is what the fan-in of the retried tasks reads)
    redis.call('PERSIST', rk)
    for _, i in ipairs(run_iids(run_id, r[3])) do redis.call('PERSIST', key_ti(i)) end
    redis.call('HSET', rk, 'state', 'running', 'ended', '', 'cancel_requested', '')
    redis.call('HDEL', rk, 'dlq_held')  -- counted again when it ends again
    redis.call('SADD', key_active(r[2]), run_id)
  end
  return true
end

-- May an ended run be reopened (retry / DLQ replay)?  Not while another run of
-- its job is active, unless the job's overlap policy is 'allow'.  Returns
-- nil when allowed, else the overlap policy that forbids it.
local function run_reopen_forbidden(run_id)
  local f = redis.call('HMGET', key_run(run_id), 'state', 'job')
  if not f[1] then return nil end
  f[2] = f[2] or job_of_run(run_id)  -- the key names the job (older run hashes too)
  if RUN_ACTIVE[f[1]] or not f[2] then return nil end
  local overlap = redis.call('HGET', key_job(f[2]), 'overlap') or JOB_DEFAULT_OVERLAP
  if overlap ~= 'allow' and redis.call('SCARD', key_active(f[2])) > 0 then
    return overlap
  end
  return nil
end
