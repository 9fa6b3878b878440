--[[ runs: DAG progress and the run lifecycle.
  Instance fields of a run's task: run, task, deps, down (comma lists),
  deps_left.  Run hash counters: total, n_done, n_succeeded, n_failed,
  n_cancelled; a run ends when n_done == total.  Every run that ends, and every
  fire recorded as a skipped or rejected run, is counted (lib/outcomes.lua). ]]
-- @include lib/lists.lua
-- @include lib/downstream.lua
-- @include lib/admission.lua
-- @include lib/streams.lua
-- @include lib/rings.lua
-- @include lib/waiters.lua
-- @include lib/breaker.lua
-- @include lib/recent.lua
-- @include lib/outcomes.lua

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
local function run_retain(rk, run_id, job_id)
  local f = redis.call('HMGET', rk, 'tasks', 'keep_s', 'n_failed')
  local names = split(f[1])
  local dead = 0
  if tonumber(f[3] or '0') ~= 0 then
    for _, t in ipairs(names) do
      if redis.call('HGET', key_ti(run_id .. '/' .. t), 'state') == 'dead' then dead = dead + 1 end
    end
  end
  if dead > 0 then
    redis.call('HSET', rk, 'dlq_held', dead)
  else
    redis.call('HDEL', rk, 'dlq_held')
    local ttl = tonumber(f[2] or '0')
    if ttl and ttl > 0 then
      redis.call('EXPIRE', rk, ttl)
      for _, t in ipairs(names) do redis.call('EXPIRE', key_ti(run_id .. '/' .. t), ttl) end
    end
  end
  local keep = tonumber(redis.call('HGET', key_job(job_id), 'keep_runs') or '0')
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
        local o = redis.call('HMGET', ork, 'state', 'dlq_held', 'tasks')
        if not o[1] then
          -- expired with its retention: only its history entry was left
          redis.call('ZREM', hist, rid)
          excess = excess - 1
        elseif tonumber(o[2] or '0') > 0 then
          -- held for the DLQ: kept, and not counted against keep_runs
          skipped = skipped + 1
          excess = excess - 1
        elseif RUN_TERMINAL[o[1]] then
          for _, t in ipairs(split(o[3])) do redis.call('DEL', key_ti(rid .. '/' .. t)) end
          redis.call('DEL', ork)
          redis.call('ZREM', hist, rid)
          excess = excess - 1
        else
          skipped = skipped + 1
        end
      end
    end
  end
  -- runs gone with their retention (keep_s) leave their history entry behind:
  -- each run end drops up to two such entries from the oldest end, which keeps
  -- up with the one entry a run adds (a history under keep_runs never trims)
  for _, rid in ipairs(redis.call('ZRANGE', hist, 0, 1)) do
    if redis.call('EXISTS', key_run(rid)) == 1 then break end
    redis.call('ZREM', hist, rid)
  end
end

-- A dead task of a run left the DLQ for good (discarded): when the run has
-- ended and none of its tasks is left there, its retention starts.
local function run_dlq_left(run_id)
  local rk = key_run(run_id)
  local f = redis.call('HMGET', rk, 'state', 'job', 'dlq_held')
  -- not held: active (retained when it ends), or its retention already started
  if not f[3] or RUN_ACTIVE[f[1]] then return end
  if redis.call('HINCRBY', rk, 'dlq_held', -1) <= 0 then run_retain(rk, run_id, f[2]) end
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
  count_run(j[1], state or 'skipped')
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
  local rows = j.rows or cjson.decode(j[1])  -- fire_one decoded (and checked) it already
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
  local recent = {}
  -- the caller may have read the tenant's admission settings already
  local max_priority = j[5]
  if not max_priority then
    local _
    _, max_priority = admission(tenant)
  end
  for _, row in ipairs(rows) do
    row.priority = clamp_priority(row.priority, max_priority)
    local iid = run_id .. '/' .. row.task
    local state, loc = 'pending', ''
    if #row.deps == 0 then
      -- a root: ready at once (the stream entry first, so the hash names it)
      local eid = stream_add(key_q(row.queue, tenant, row.priority), iid)
      loc, state = 'q:' .. eid, 'ready'
      ring_add(key_ring(row.queue, row.priority), tenant)
      note_oldest(row.queue, row.priority, tenant, eid)
      gather_wake(woken, row.queue)
    end
    redis.call('HSET', key_ti(iid), 'id', iid, 'name', row.name, 'kind', row.kind,
      'args', redis.call('HGET', jk, 'args:' .. row.task) or '', 'queue', row.queue,
      'tenant', tenant, 'priority', row.priority, 'timeout_ms', row.timeout_ms,
      'max_attempts', row.max_attempts, 'retry_base_ms', row.retry_base_ms,
      'retry_cap_ms', row.retry_cap_ms, 'result_ttl_s', 0, 'created', now, 'attempt', 0,
      'epoch', 0, 'budget', 0, 'run', run_id, 'task', row.task,
      'deps', table.concat(row.deps, ','), 'down', table.concat(row.down, ','),
      'deps_left', #row.deps, 'state', state, 'loc', loc, 'due', '')
    note_recent(recent, iid, now)
    if row.cpu or row.mem then
      redis.call('HSET', key_ti(iid), 'cpu', row.cpu or '', 'mem', row.mem or '')
    end
  end
  if wake_now then
    wake_gathered(woken)
  end
  save_recent(recent)
  -- tenants and queues were registered by job_put
  redis.call('SADD', key_active(job_id), run_id)
  redis.call('ZADD', key_runs(job_id), fire_ms, run_id)
end

local function run_check_end(run_id, now)
  local rk = key_run(run_id)
  local f = redis.call('HMGET', rk, 'total', 'n_done', 'n_failed', 'cancel_requested', 'state',
    'job', 'n_cancelled', 'tenant')
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
  count_run(f[8], state)
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
    walk_downstream(run_id, f[2], function(dti, did)
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
