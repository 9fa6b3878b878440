--[[ job_put: create or update a job (keyed by tenant + name).
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] the job, one msgpack map (engine/argv.py job_put_row), fields by name,
          text unless said: tenant, name, id (the job id to use if the job is
          new), spec (JSON), template (JSON, lib/template.lua), sig (trigger
          signature [cron, every, at, tz]: the schedule is kept when unchanged);
          absent = none: next_ms (next nominal fire), due_ms (next due: nominal
          + jitter), upstreams (depends_on: upstream job names of the same
          tenant, comma list), legacy (sha1 of the spec as an older release
          wrote it, spec_json_full: that text is "unchanged" too),
          deadline_ms; absent = its default (JOB_DEFAULT_*, model/fields.py):
          overlap, keep_runs, keep_s, pause_after_failures, paused ("1"),
          breaker_ratio, breaker_min, breaker_window_s, breaker_cooldown_s;
          args: a map task name -> msgpack args.
  The job hash holds no field at its default (JOB_DEFAULT_*: every reader takes
  an absent field as it) and no id (the key says it): an update drops those
  an older release wrote.
  Returns: {job_id, version, change} change = created | updated | unchanged,
  or legacy: nothing written, the job's hash is an older release's (it has the
  field id) and the row has no legacy sha1 to compare its spec with; the
  caller sends the row again with it (engine/job_writes.py put_many).
  Job chaining: the job's upstreams are stored (upstreams, chain = trigger |
  upstreams: whether its own trigger or its upstreams start it) and the
  upstreams' reverse index (their chain_down, lib/chain_down.lua) kept; a
  changed list forgets what the dropped upstreams had satisfied (chain_ok,
  lib/chain.lua).
  Errors: REJECTED for a malformed row, naming the field (not a msgpack map, a
  field not text, args not a map of text); INVALID depends_on (an unknown
  upstream, the job itself, or a cycle, named: lib/chain_graph.lua); CONFLICT
  (a new job's id exists); FORBIDDEN when a new or changed job has a command
  or container task and the tenant lacks the grant allow_commands
  (lib/grant.lua): nothing is written.  An unchanged job is not refused (a
  beat re-applying its declared jobs after a revoke must not stop); lease.lua
  keeps its command tasks from running.
  An identical spec is a no-op (the beat upserts declared jobs at every start and
  must not reset a schedule that has fires due), except for a job the beat
  parked (job_park.lua): any put unparks it and schedules it again. ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/grant.lua
-- @include lib/lists.lua
-- @include lib/chain_graph.lua
-- @include lib/chain_down.lua
-- @include lib/template.lua

local now = now_ms(ARGV[1])
-- the settings written only when not at their default (deadline_ms: none)
local SETTINGS = {'overlap', 'keep_runs', 'keep_s', 'pause_after_failures', 'paused',
  'breaker_ratio', 'breaker_min', 'breaker_window_s', 'breaker_cooldown_s', 'deadline_ms'}

-- checks before writes
local ok, r = pcall(cmsgpack.unpack, ARGV[2] or '')
if not ok or type(r) ~= 'table' then return err('REJECTED', 'the job row is not a msgpack map') end
for _, f in ipairs({'tenant', 'name', 'id', 'spec', 'template', 'sig'}) do
  if type(r[f]) ~= 'string' then return err('REJECTED', 'job row: ' .. f .. ' must be a string') end
end
for _, f in ipairs({'next_ms', 'due_ms', 'upstreams', 'legacy', unpack(SETTINGS)}) do
  if r[f] ~= nil and type(r[f]) ~= 'string' then
    return err('REJECTED', 'job row: ' .. f .. ' must be a string')
  end
end
local task_args = r.args or {}
if type(task_args) ~= 'table' then return err('REJECTED', 'job row: args must be a map') end
for t, a in pairs(task_args) do
  if type(t) ~= 'string' or type(a) ~= 'string' then
    return err('REJECTED', 'job row: args must map task names to msgpack text')
  end
end
local tenant, name, spec, template, sig = r.tenant, r.name, r.spec, r.template, r.sig
local next_fire, next_due, upstreams = r.next_ms or '', r.due_ms or '', r.upstreams or ''

local job_id = job_lookup(tenant, name)
local change = 'updated'
local old = {}
if not job_id then
  job_id = r.id
  change = 'created'
  if redis.call('EXISTS', key_job(job_id)) == 1 then
    return err('CONFLICT', 'job id ' .. job_id .. ' already exists')
  end
end
local jk = key_job(job_id)
if change == 'updated' then
  old = redis.call('HMGET', jk, 'spec', 'trigger_sig', 'version', 'parked_at', 'upstreams', 'id')
end
local parked = old[4] and old[4] ~= ''
if change == 'updated' and not parked and old[1] and (old[1] == spec
    or (r.legacy and redis.sha1hex(old[1]) == r.legacy)) then
  return {job_id, tonumber(old[3]), 'unchanged'}
end
if change == 'updated' and not parked and old[6] and not r.legacy then
  -- an older release's hash (it has id): its spec is that release's text, so
  -- whether it changed takes that text's sha1, which put_many sends on asking
  return {job_id, tonumber(old[3]), 'legacy'}
end
local rows = template_rows(template)
if not rows then return err('REJECTED', 'job row: template is not a JSON list of task rows') end
for _, row in ipairs(rows) do
  if needs_grant(row.kind) and not granted(tenant) then
    return not_granted(tenant, 'job ' .. name .. ', task ' .. row.task .. ' is a ' .. row.kind)
  end
end
local ups = split(upstreams)
if #ups > 0 then
  local why = chain_refusal(tenant, name, ups)
  if why then return err('INVALID', 'depends_on ' .. why) end
end

local fields = {'spec', spec, 'template', template, 'trigger_sig', sig}
local gone = {}
local version = 1
if change == 'created' then
  redis.call('ZADD', key_tenants(), 0, tenant)
  redis.call('ZADD', key_jobidx(), 0, job_member(tenant, name, job_id))
  for _, v in ipairs({'tenant', tenant, 'name', name, 'created', now, 'version', 1}) do
    fields[#fields + 1] = v
  end
else
  version = redis.call('HINCRBY', jk, 'version', 1)
  fields[#fields + 1], fields[#fields + 2] = 'updated', now
  -- drop args of tasks that left the DAG, and the id an older release wrote
  gone[1] = 'id'
  for _, field in ipairs(redis.call('HKEYS', jk)) do
    if string.sub(field, 1, 5) == 'args:' then gone[#gone + 1] = field end
  end
end
for _, f in ipairs(SETTINGS) do
  if r[f] then
    fields[#fields + 1], fields[#fields + 2] = f, r[f]
  elseif change == 'updated' then
    gone[#gone + 1] = f
  end
end
for t, a in pairs(task_args) do fields[#fields + 1], fields[#fields + 2] = 'args:' .. t, a end
if parked then
  -- off the schedule while parked: the ZADD below puts it back
  gone[#gone + 1], gone[#gone + 2] = 'parked_reason', 'parked_at'
  redis.call('ZREM', key_attention(), ATTENTION.parked .. job_id)
end
-- job chaining: the reverse index and what the job waits for
local old_ups = old[5] or ''
if old_ups ~= upstreams then
  for _, u in ipairs(split(old_ups)) do chain_down_edit(tenant, u, name, false) end
  for _, u in ipairs(ups) do chain_down_edit(tenant, u, name, true) end
  local kept = {}
  for _, u in ipairs(split(redis.call('HGET', jk, 'chain_ok') or '')) do
    if string.find(',' .. upstreams .. ',', ',' .. u .. ',', 1, true) then kept[#kept + 1] = u end
  end
  if #kept > 0 then
    fields[#fields + 1], fields[#fields + 2] = 'chain_ok', table.concat(kept, ',')
  else
    gone[#gone + 1] = 'chain_ok'
  end
end
if #ups == 0 then
  if old_ups ~= '' then
    for _, f in ipairs({'upstreams', 'chain', 'chain_wait'}) do gone[#gone + 1] = f end
  end
else
  local t = cjson.decode(sig)  -- [cron, every, at, tz]
  local own = (t[1] ~= cjson.null and t[1] ~= '') or (t[2] ~= cjson.null and t[2] ~= '')
    or (t[3] ~= cjson.null and t[3] ~= '')
  for _, v in ipairs({'upstreams', upstreams, 'chain', own and 'trigger' or 'upstreams'}) do
    fields[#fields + 1] = v
  end
  if not own then gone[#gone + 1] = 'chain_wait' end
end
-- register the job's queues now, so creating a run need not
for _, row in ipairs(rows) do redis.call('SADD', key_queues(), row.queue) end
local scheduled = change == 'updated' and redis.call('ZSCORE', key_schedule(), job_id)
if r.paused == '1' or next_fire == '' then
  redis.call('ZREM', key_schedule(), job_id)
  fields[#fields + 1], fields[#fields + 2] = 'next_fire', next_fire
elseif change == 'created' or old[2] ~= sig or not scheduled then
  redis.call('ZADD', key_schedule(), next_due, job_id)
  fields[#fields + 1], fields[#fields + 2] = 'next_fire', next_fire
end
-- what an older release wrote at its default, or this one no longer holds
if #gone > 0 then redis.call('HDEL', jk, unpack(gone)) end
redis.call('HSET', jk, unpack(fields))
return {job_id, version, change}
