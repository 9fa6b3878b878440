--[[ runs: DAG progress and the run lifecycle (included by lib/common.lua, so
  every script that ends an instance also moves its run on).
  Instance fields of a run's task: run, task, deps, down (comma lists),
  deps_left.  Run hash counters: total, n_done, n_succeeded, n_failed,
  n_cancelled; a run ends when n_done == total. ]]

local function split(list)
  local out = {}
  if list and list ~= '' then
    for x in string.gmatch(list, '[^,]+') do out[#out + 1] = x end
  end
  return out
end

-- Cancel one instance wherever it is.  Returns the resulting state:
-- 'cancelled', 'cancel_requested' (running: revoked by the next heartbeat),
-- or the terminal state it already had; nil when it does not exist.
local function cancel_instance(iid, now)
  local ti = key_ti(iid)
  local f = redis.call('HMGET', ti, 'state', 'loc', 'queue', 'tenant', 'prio')
  local state, loc = f[1], f[2] or ''
  if not state then return nil end
  -- dead work is terminal but still in the DLQ: cancelling takes it out
  if TASK_TERMINAL[state] and state ~= 'dead' then return state end
  if TASK_LEASED[state] then
    redis.call('HSET', ti, 'cancel_requested', '1')
    return 'cancel_requested'
  end
  if state == 'ready' then
    local stream = key_q(f[3], f[4], f[5])
    redis.call('XDEL', stream, string.sub(loc, 3))  -- not delivered: nothing to ack
    if ready_count(stream) == 0 then redis.call('ZREM', key_ring(f[3], f[5]), f[4]) end
  elseif state == 'retry_wait' or state == 'scheduled' then
    redis.call('ZREM', key_timers(), iid)
  elseif state == 'held' then
    redis.call('LREM', key_held(job_of_run(redis.call('HGET', ti, 'run'))), 0, iid)
  elseif state == 'dead' then
    redis.call('XDEL', key_dlq(f[4]), string.sub(loc, 5))
    -- a dead task already counted as ended (failed) in its run: recount it
    local run_id = redis.call('HGET', ti, 'run')
    if run_id and run_id ~= '' then
      redis.call('HINCRBY', key_run(run_id), 'n_done', -1)
      redis.call('HINCRBY', key_run(run_id), 'n_failed', -1)
    end
  end
  redis.call('HSET', ti, 'cancel_requested', '1')
  make_terminal(ti, iid, 'cancelled', now)
  return 'cancelled'
end

-- Once a run ends, it and its instances expire after keep_s, and the job's
-- history keeps at most keep_runs runs (oldest ended runs deleted, ≤ 10 a call).
local function run_retain(rk, run_id, job_id)
  local f = redis.call('HMGET', rk, 'tasks', 'keep_s')
  local ttl = tonumber(f[2] or '0')
  if ttl and ttl > 0 then
    redis.call('EXPIRE', rk, ttl)
    for _, t in ipairs(split(f[1])) do redis.call('EXPIRE', key_ti(run_id .. '/' .. t), ttl) end
  end
  local keep = tonumber(redis.call('HGET', key_job(job_id), 'keep_runs') or '0')
  local hist = key_runs(job_id)
  if keep and keep > 0 then
    local excess = redis.call('ZCARD', hist) - keep
    if excess > 0 then
      for _, rid in ipairs(redis.call('ZRANGE', hist, 0, math.min(excess, 10) - 1)) do
        local ork = key_run(rid)
        local st = redis.call('HGET', ork, 'state')
        if RUN_TERMINAL[st] then
          for _, t in ipairs(split(redis.call('HGET', ork, 'tasks'))) do
            redis.call('DEL', key_ti(rid .. '/' .. t))
          end
          redis.call('DEL', ork)
          redis.call('ZREM', hist, rid)
        end
      end
    end
  end
end

-- Record a fire that created no run (overlap, or the job paused while it was
-- buffered): a 'skipped' run without instances in the job's history and a
-- counted stat, so no fire is dropped silently.
local function record_skipped(job_id, run_id, fire_ms, trigger, now, reason, state)
  local jk = key_job(job_id)
  local j = redis.call('HMGET', jk, 'tenant', 'name', 'keep_s')
  local rk = key_run(run_id)
  redis.call('HSET', rk, 'id', run_id, 'job', job_id, 'tenant', j[1], 'job_name', j[2],
    'state', state or 'skipped', 'reason', reason, 'scheduled_for', fire_ms, 'trigger', trigger,
    'created', now, 'ended', now, 'total', 0, 'tasks', '')
  redis.call('ZADD', key_runs(job_id), fire_ms, run_id)
  redis.call('HINCRBY', key_stats(), state == 'rejected' and 'fires_rejected'
    or 'fires_overlap_skipped', 1)
  local keep = tonumber(j[3] or '0')
  if keep and keep > 0 then redis.call('EXPIRE', rk, keep) end
end

-- Create a run and its instances from the job's compiled template; the
-- roots are made ready at once.  `job` may carry the job fields the caller
-- already read (template, tenant, name, keep_s[, max_priority]); `woken` (optional) collects
-- queue -> count so a batch wakes each queue once.
local function create_run(job_id, run_id, fire_ms, trigger, now, params, job, woken)
  local jk = key_job(job_id)
  local j = job or redis.call('HMGET', jk, 'template', 'tenant', 'name', 'keep_s')
  local rows = cjson.decode(j[1])
  local tenant = j[2]
  local names = {}
  for i, row in ipairs(rows) do names[i] = row.task end
  local rk = key_run(run_id)
  redis.call('HSET', rk, 'id', run_id, 'job', job_id, 'job_name', j[3], 'tenant', tenant,
    'state', 'queued', 'scheduled_for', fire_ms, 'trigger', trigger, 'created', now,
    'total', #rows, 'n_done', 0, 'n_succeeded', 0, 'n_failed', 0, 'n_cancelled', 0,
    'tasks', table.concat(names, ','), 'keep_s', j[4] or '0', 'params', params or '')
  local wake_now = woken == nil
  woken = woken or {}
  -- the caller may have read the tenant's admission settings already
  local max_prio = j[5]
  if not max_prio then
    local _
    _, max_prio = admission(tenant)
  end
  for _, row in ipairs(rows) do
    row.prio = clamp_prio(row.prio, max_prio)
    local iid = run_id .. '/' .. row.task
    local state, loc = 'pending', ''
    if #row.deps == 0 then
      -- a root: ready at once (the stream entry first, so the hash names it)
      local eid = stream_add(key_q(row.queue, tenant, row.prio), iid)
      loc, state = 'q:' .. eid, 'ready'
      ring_add(key_ring(row.queue, row.prio), tenant)
      note_oldest(row.queue, row.prio, tenant, eid)
      woken[row.queue] = (woken[row.queue] or 0) + 1
    end
    redis.call('HSET', key_ti(iid), 'id', iid, 'name', row.name, 'kind', row.kind,
      'args', redis.call('HGET', jk, 'args:' .. row.task) or '', 'queue', row.queue,
      'tenant', tenant, 'prio', row.prio, 'timeout_ms', row.timeout_ms,
      'max_attempts', row.max_attempts, 'retry_base_ms', row.retry_base_ms,
      'retry_cap_ms', row.retry_cap_ms, 'result_ttl_s', 0, 'created', now, 'attempt', 0,
      'epoch', 0, 'budget', 0, 'run', run_id, 'task', row.task,
      'deps', table.concat(row.deps, ','), 'down', table.concat(row.down, ','),
      'deps_left', #row.deps, 'state', state, 'loc', loc, 'due', '')
    if row.cpu or row.mem then
      redis.call('HSET', key_ti(iid), 'cpu', row.cpu or '', 'mem', row.mem or '')
    end
  end
  if wake_now then
    for q, n in pairs(woken) do wake(q, n) end
  end
  -- tenants and queues were registered by job_put
  redis.call('SADD', key_active(job_id), run_id)
  redis.call('ZADD', key_runs(job_id), fire_ms, run_id)
end

local function run_check_end(run_id, now)
  local rk = key_run(run_id)
  local f = redis.call('HMGET', rk, 'total', 'n_done', 'n_failed', 'cancel_requested', 'state',
    'job', 'n_cancelled')
  if not f[1] or tonumber(f[2]) < tonumber(f[1]) then return end
  if not RUN_ACTIVE[f[5]] then return end
  local state = 'succeeded'
  if f[4] == '1' then
    state = 'cancelled'
  elseif tonumber(f[3]) > 0 then
    state = 'failed'
  elseif tonumber(f[7]) > 0 then
    state = 'cancelled'
  end
  redis.call('HSET', rk, 'state', state, 'ended', now)
  local job_id = f[6]
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
    end
    -- buffer_one: the fire held back while runs were going starts now, unless
    -- the job was paused meanwhile (a paused job takes no scheduled fires)
    local buffered = redis.call('HGET', jk, 'buffered')
    if buffered and buffered ~= '' and redis.call('SCARD', key_active(job_id)) == 0 then
      redis.call('HSET', jk, 'buffered', '')
      local fire_ms, trig = string.match(buffered, '^(%d+)|(.*)$')
      local rid = job_id .. '@' .. fire_ms
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

on_end = function(ti, iid, state, now)
  local f = redis.call('HMGET', ti, 'run', 'down')
  local run_id = f[1]
  if not run_id or run_id == '' then return end
  -- a circuit-breaker trial that ends without succeeding (cancelled while
  -- ready or held, dead-lettered...) reopens its breaker (a no-op otherwise)
  if state ~= 'succeeded' then breaker_trial_ended(iid, run_id, now, 'ended ' .. state, false) end
  local rk = key_run(run_id)
  redis.call('HINCRBY', rk, 'n_done', 1)
  if state == 'succeeded' then
    redis.call('HINCRBY', rk, 'n_succeeded', 1)
    -- fan-out / fan-in: a downstream task is made ready once, when its last
    -- dependency succeeds (scripts are serialized, so parents cannot race)
    for _, d in ipairs(split(f[2])) do
      local did = run_id .. '/' .. d
      local dti = key_ti(did)
      if redis.call('HINCRBY', dti, 'deps_left', -1) <= 0 then
        local g = redis.call('HMGET', dti, 'state', 'queue', 'tenant', 'prio')
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
    local todo = split(f[2])
    local i = 1
    while i <= #todo do
      local did = run_id .. '/' .. todo[i]
      i = i + 1
      local dti = key_ti(did)
      local g = redis.call('HMGET', dti, 'state', 'down')
      if g[1] == 'pending' then
        redis.call('HSET', dti, 'state', mark, 'ended', now)
        notify_done(dti, did)  -- terminal too: result() waiters must not wait forever
        redis.call('HINCRBY', rk, 'n_done', 1)
        redis.call('HINCRBY', rk, mark == 'cancelled' and 'n_cancelled' or 'n_failed', 1)
        for _, dd in ipairs(split(g[2])) do todo[#todo + 1] = dd end
      end
    end
  end
  run_check_end(run_id, now)
end

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

-- Retry a failed task of a run (also what DLQ replay does for run tasks):
-- ready again with a fresh budget, its upstream_failed/cancelled downstream
-- reset to pending, and the run reopened.  Returns true when it was retried.
local function retry_run_task(run_id, task, now)
  local iid = run_id .. '/' .. task
  local ti = key_ti(iid)
  local f = redis.call('HMGET', ti, 'state', 'loc', 'queue', 'tenant', 'prio', 'attempt', 'down')
  if f[1] ~= 'dead' and f[1] ~= 'cancelled' and f[1] ~= 'upstream_failed' then return false end
  -- an upstream that failed (and is not retried itself) means it can never run:
  -- reopening the run for it would leave a run that nothing can progress
  local deps = split(redis.call('HGET', ti, 'deps'))
  for _, dep in ipairs(deps) do
    local st = redis.call('HGET', key_ti(run_id .. '/' .. dep), 'state')
    if not st or (TASK_TERMINAL[st] and st ~= 'succeeded') then return false end
  end
  local rk = key_run(run_id)
  local counter = f[1] == 'cancelled' and 'n_cancelled' or 'n_failed'
  if f[1] == 'dead' then redis.call('XDEL', key_dlq(f[4]), string.sub(f[2], 5)) end
  redis.call('HINCRBY', rk, 'n_done', -1)
  redis.call('HINCRBY', rk, counter, -1)
  redis.call('PERSIST', ti)
  redis.call('HSET', ti, 'budget', f[6], 'ended', '', 'cancel_requested', '')
  -- a task whose own upstream is not done waits for it
  local left = unmet_deps(run_id, deps)
  redis.call('HSET', ti, 'deps_left', left)
  if left == 0 then
    make_ready(ti, iid, f[3], f[4], f[5])
    wake(f[3], 1)
  else
    redis.call('HSET', ti, 'state', 'pending', 'loc', '')
  end
  local todo = split(f[7])
  local i = 1
  while i <= #todo do
    local did = run_id .. '/' .. todo[i]
    i = i + 1
    local dti = key_ti(did)
    local g = redis.call('HMGET', dti, 'state', 'down', 'deps')
    if g[1] == 'upstream_failed' or (g[1] == 'cancelled' and redis.call('HGET', dti, 'attempt') == '0') then
      local dleft = unmet_deps(run_id, split(g[3]))
      redis.call('PERSIST', dti)
      -- a run cancel marked it: once reset, its lease must not be revoked
      redis.call('HSET', dti, 'state', 'pending', 'ended', '', 'deps_left', dleft,
        'cancel_requested', '')
      redis.call('HINCRBY', rk, 'n_done', -1)
      redis.call('HINCRBY', rk, g[1] == 'cancelled' and 'n_cancelled' or 'n_failed', -1)
      for _, dd in ipairs(split(g[2])) do todo[#todo + 1] = dd end
    end
  end
  local r = redis.call('HMGET', rk, 'state', 'job', 'tasks')
  if not RUN_ACTIVE[r[1]] then
    -- live again: its retention TTLs go, on every instance (a succeeded
    -- upstream's record is what the fan-in of the retried tasks reads)
    redis.call('PERSIST', rk)
    for _, t in ipairs(split(r[3])) do redis.call('PERSIST', key_ti(run_id .. '/' .. t)) end
    redis.call('HSET', rk, 'state', 'running', 'ended', '', 'cancel_requested', '')
    redis.call('SADD', key_active(r[2]), run_id)
  end
  return true
end

-- May an ended run be reopened (retry / DLQ replay)?  Not while another run of
-- its job is active, unless the job's overlap policy is 'allow'.  Returns
-- nil when allowed, else the overlap policy that forbids it.
local function run_reopen_forbidden(run_id)
  local f = redis.call('HMGET', key_run(run_id), 'state', 'job')
  if RUN_ACTIVE[f[1]] or not f[2] then return nil end
  local overlap = redis.call('HGET', key_job(f[2]), 'overlap')
  if overlap and overlap ~= 'allow' and redis.call('SCARD', key_active(f[2])) > 0 then
    return overlap
  end
  return nil
end
