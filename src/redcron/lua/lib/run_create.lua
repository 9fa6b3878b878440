--[[ run_create: a run and its instances from the job's compiled template,
  or the record of a fire that made none (skipped, rejected).  Every fire
  recorded as a skipped or rejected run is counted (lib/outcomes.lua).  A root
  whose task has a rate (rate_ms...) waits on the timers for promote to hand it
  over at its turn (lib/rate.lua); a downstream task goes the same way
  (make_ready sends it there).  A job
  with a deadline_ms arms the run's deadline (lib/deadlines.lua). ]]
-- @include lib/admission.lua
-- @include lib/deadlines.lua
-- @include lib/ring_add.lua
-- @include lib/rings.lua
-- @include lib/outcomes.lua
-- @include lib/ti_fields.lua
-- @include lib/template.lua
-- @include lib/followup.lua

-- List a new run in the shard's and its tenant's run indexes (newest first for
-- /v1/runs), each trimmed to its newest RUNIDX_MAX / TRUNS_MAX: older runs stay
-- in their job's history.  An entry whose run expired is skipped by readers.
local function index_run(run_id, tenant, now)
  local all, mine = key_runidx(), key_truns(tenant)
  redis.call('ZADD', all, now, run_id)
  redis.call('ZADD', mine, now, run_id)
  if redis.call('ZCARD', all) > RUNIDX_MAX then
    redis.call('ZREMRANGEBYRANK', all, 0, -(RUNIDX_MAX + 1))
  end
  if redis.call('ZCARD', mine) > TRUNS_MAX then
    redis.call('ZREMRANGEBYRANK', mine, 0, -(TRUNS_MAX + 1))
  end
end

-- Record a fire that created no run (overlap, or the job paused while it was
-- buffered): a 'skipped' run without instances in the job's history and a
-- counted stat, so no fire is dropped silently.
local function record_skipped(job_id, run_id, fire_ms, trigger, now, reason, state)
  local jk = key_job(job_id)
  local j = redis.call('HMGET', jk, 'tenant', 'name', 'keep_s')
  local rk = key_run(run_id)
  redis.call('HSET', rk, 'tenant', j[1], 'job_name', j[2],
    'state', state or 'skipped', 'reason', reason, 'scheduled_for', fire_ms, 'trigger', trigger,
    'created', now, 'ended', now, 'total', 0, 'tasks', '')
  redis.call('ZADD', key_runs(job_id), fire_ms, run_id)
  index_run(run_id, j[1], now)
  redis.call('HINCRBY', key_counters(), state == 'rejected' and 'fires_rejected'
    or 'fires_overlap_skipped', 1)
  count_run(j[1], state or 'skipped')
  local keep = tonumber(j[3] or JOB_DEFAULT_KEEP_S)
  if keep and keep > 0 then redis.call('EXPIRE', rk, keep) end
end

-- Create a run and its instances from the job's compiled template; the
-- roots are made ready at once.  `job` may carry the job fields the caller
-- already read: tenant, name, keep_s, deadline_ms, rows (the decoded template)
-- and optionally max_priority (the tenant's), traceparent and tracestate (the
-- fire's trace context, given to every instance: redcron/tracing.py); `woken` (optional) collects
-- queue -> count so a batch wakes each queue once.
local function create_run(job_id, run_id, fire_ms, trigger, now, params, job, woken)
  local jk = key_job(job_id)
  local j = job
  if not j then
    local f = read_job_run(jk)
    j = {template = f[JOB_RUN_TEMPLATE], tenant = f[JOB_RUN_TENANT], name = f[JOB_RUN_NAME],
         keep_s = f[JOB_RUN_KEEP_S], deadline_ms = f[JOB_RUN_DEADLINE_MS]}
  end
  local rows = j.rows or template_rows(j.template)  -- fire_one decoded (and checked) it already
  local tenant = j.tenant
  local names = {}
  for i, row in ipairs(rows) do names[i] = row.task end
  local rk = key_run(run_id)
  -- the id and the job are the key's (job_of_run); no params: no field; no
  -- counter at 0 (n_done, n_succeeded, n_failed, n_cancelled: absent reads 0,
  -- HINCRBY makes them)
  redis.call('HSET', rk, 'job_name', j.name, 'tenant', tenant,
    'state', 'queued', 'scheduled_for', fire_ms, 'trigger', trigger, 'created', now,
    'total', #rows, 'tasks', table.concat(names, ','), 'keep_s', j.keep_s or JOB_DEFAULT_KEEP_S)
  if params and params ~= '' then redis.call('HSET', rk, 'params', params) end
  -- a deadline counts from the nominal fire time (a manual or chained run's is
  -- when it was made), so a buffered or catch-up fire may be late at once
  local deadline_ms = tonumber(j.deadline_ms or '')
  if deadline_ms and deadline_ms > 0 then deadline_arm(rk, run_id, fire_ms + deadline_ms) end
  local wake_now = woken == nil
  woken = woken or {}
  -- the caller may have read the tenant's admission settings already
  local max_priority = j.max_priority
  if not max_priority then
    local _
    _, max_priority = admission(tenant)
  end
  for _, row in ipairs(rows) do
    row.priority = clamp_priority(row.priority, max_priority)
    local iid = run_id .. '/' .. row.task
    local state, loc = 'pending', ''
    if #row.deps == 0 and row.map_over then
      -- mapped over a param: a follow-up makes its instances (lib/runs.lua)
      state = 'mapping'
      follow('map', {iid})
    elseif #row.deps == 0 and row.rate_ms then
      -- a root with a rate: promote hands it over at its turn (lib/rate.lua)
      redis.call('ZADD', key_timers(), now, iid)
      loc, state = 'timer', 'scheduled'
    elseif #row.deps == 0 then
      -- a root: ready at once (the stream entry first, so the hash names it)
      local eid = stream_add(key_q(row.queue, tenant, row.priority), iid)
      loc, state = 'q:' .. eid, 'ready'
      ring_add(key_ring(row.queue, row.priority), tenant)
      note_oldest(row.queue, row.priority, tenant, eid)
      gather_wake(woken, row.queue)
    end
    -- the id is the key's, and says the run and the task (run_of_task); an empty
    -- field or one at its default is not written
    -- (a run's task keeps its instance's result for the run's keep_s: no result_ttl_s)
    local fields = {'name', row.name, 'kind', row.kind,
      'args', redis.call('HGET', jk, 'args:' .. row.task) or '', 'queue', row.queue,
      'tenant', tenant, 'priority', row.priority, 'max_attempts', row.max_attempts,
      'created', now, 'attempt', 0, 'epoch', 0, 'state', state}
    if loc ~= '' then push_field(fields, 'loc', loc) end
    if #row.deps > 0 then
      push_field(fields, 'deps', table.concat(row.deps, ','))
      push_field(fields, 'deps_left', #row.deps)
    end
    if #row.down > 0 then push_field(fields, 'down', table.concat(row.down, ',')) end
    push_unless_default(fields, 'timeout_ms', row.timeout_ms, TI_DEFAULT_TIMEOUT_MS)
    push_unless_default(fields, 'retry_base_ms', row.retry_base_ms, TI_DEFAULT_RETRY_BASE_MS)
    push_unless_default(fields, 'retry_cap_ms', row.retry_cap_ms, TI_DEFAULT_RETRY_CAP_MS)
    if row.cpu or row.mem then
      push_field(fields, 'cpu', row.cpu or '')
      push_field(fields, 'mem', row.mem or '')
    end
    if row.ck then  -- its concurrency key (lib/ckeys.lua): lease takes a slot of it
      push_field(fields, 'ck', row.ck)
      push_field(fields, 'ckn', row.ckn)
    end
    if (j.traceparent or '') ~= '' then  -- the run's tasks share the fire's trace
      push_field(fields, 'traceparent', j.traceparent)
      if (j.tracestate or '') ~= '' then push_field(fields, 'tracestate', j.tracestate) end
    end
    for _, k in ipairs({'map_over', 'map_max'}) do
      if row[k] then push_field(fields, k, row[k]) end
    end
    for _, k in ipairs(row.rate_ms and {'rate_ms', 'rate_n', 'rate_key', 'rate_group'} or {}) do
      if row[k] then push_field(fields, k, row[k]) end
    end
    redis.call('HSET', key_ti(iid), unpack(fields))
  end
  if wake_now then
    wake_gathered(woken)
  end
  -- tenants and queues were registered by job_put
  redis.call('SADD', key_active(job_id), run_id)
  redis.call('ZADD', key_runs(job_id), fire_ms, run_id)
  index_run(run_id, tenant, now)
end
