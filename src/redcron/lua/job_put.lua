--[[ job_put: create or update a job (keyed by tenant + name).
  KEYS[1] shard prefix
  ARGV[1] tenant   ARGV[2] name   ARGV[3] job id to use if the job is new
  ARGV[4] spec (JSON)   ARGV[5] template (JSON, see jobs.py)
  ARGV[6] trigger signature (cron|every|at + tz): the schedule is kept when unchanged
  ARGV[7] next nominal fire ms ("" = none)   ARGV[8] next due ms (nominal + jitter)
  ARGV[9] overlap   ARGV[10] keep_runs   ARGV[11] keep_s   ARGV[12] pause_after_failures
  ARGV[13] paused (1|0)   ARGV[14] now_override_ms
  ARGV[15] depends_on: upstream job names of the same tenant, comma list ("" = none)
  ARGV[16..] pairs: task name, msgpack args
  Returns: {job_id, version, change} change = created | updated | unchanged
  Job chaining: the job's upstreams are stored (upstreams, chain = trigger |
  upstreams: whether its own trigger or its upstreams start it) and the
  upstreams' reverse index (their chain_down, lib/chain_down.lua) kept; a
  changed list forgets what the dropped upstreams had satisfied (chain_ok,
  lib/chain.lua).
  Errors: INVALID depends_on (an unknown upstream, the job itself, or a cycle,
  named: lib/chain_graph.lua); CONFLICT (a new job's id exists); FORBIDDEN when a new or changed
  job has a command or container task and the tenant lacks the grant
  allow_commands (lib/grant.lua): nothing is written.  An unchanged job is not
  refused (a beat re-applying its declared jobs after a revoke must not stop);
  lease.lua keeps its command tasks from running.
  An identical spec is a no-op (the beat upserts declared jobs at every start and
  must not reset a schedule that has fires due), except for a job the beat
  parked (job_park.lua): any put unparks it and schedules it again. ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/grant.lua
-- @include lib/lists.lua
-- @include lib/chain_graph.lua
-- @include lib/chain_down.lua

local tenant, name, new_id, spec, template, sig = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5],
  ARGV[6]
local next_fire, next_due, overlap, keep_runs = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local keep_s, pause_after_failures, paused = ARGV[11], ARGV[12], ARGV[13]
local now = now_ms(ARGV[14])
local upstreams = ARGV[15]
local FIRST_ARG = 16  -- ARGV[16..]: task name, msgpack args pairs
local job_id = job_lookup(tenant, name)
local change = 'updated'
if not job_id then
  job_id = new_id
  change = 'created'
  if redis.call('EXISTS', key_job(job_id)) == 1 then
    return err('CONFLICT', 'job id ' .. job_id .. ' already exists')
  end
end
local jk = key_job(job_id)
local old = redis.call('HMGET', jk, 'spec', 'trigger_sig', 'paused', 'version', 'parked_at',
  'upstreams')
local parked = old[5] and old[5] ~= ''
if change == 'updated' and old[1] == spec and not parked then
  return {job_id, tonumber(old[4]), 'unchanged'}
end
local rows = cjson.decode(template)
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

local version = redis.call('HINCRBY', jk, 'version', 1)
if change == 'created' then
  redis.call('ZADD', key_tenants(), 0, tenant)
  redis.call('ZADD', key_jobidx(), 0, job_member(tenant, name, job_id))
  redis.call('HSET', jk, 'id', job_id, 'tenant', tenant, 'name', name, 'created', now,
    'consecutive_failures', 0)
else
  -- drop args of tasks that left the DAG
  for _, field in ipairs(redis.call('HKEYS', jk)) do
    if string.sub(field, 1, 5) == 'args:' then redis.call('HDEL', jk, field) end
  end
end
redis.call('HSET', jk, 'spec', spec, 'template', template, 'trigger_sig', sig,
  'overlap', overlap, 'keep_runs', keep_runs, 'keep_s', keep_s,
  'pause_after_failures', pause_after_failures, 'paused', paused, 'updated', now)
if parked then
  -- off the schedule while parked: the ZADD below puts it back
  redis.call('HDEL', jk, 'parked_reason', 'parked_at')
  redis.call('ZREM', key_attention(), ATTENTION.parked .. job_id)
end
-- job chaining: the reverse index and what the job waits for
local old_ups = old[6] or ''
if old_ups ~= upstreams then
  for _, u in ipairs(split(old_ups)) do chain_down_edit(tenant, u, name, false) end
  for _, u in ipairs(ups) do chain_down_edit(tenant, u, name, true) end
  local kept = {}
  for _, u in ipairs(split(redis.call('HGET', jk, 'chain_ok') or '')) do
    if string.find(',' .. upstreams .. ',', ',' .. u .. ',', 1, true) then kept[#kept + 1] = u end
  end
  if #kept > 0 then
    redis.call('HSET', jk, 'chain_ok', table.concat(kept, ','))
  else
    redis.call('HDEL', jk, 'chain_ok')
  end
end
if #ups == 0 then
  if old_ups ~= '' then
    redis.call('HDEL', jk, 'upstreams', 'chain', 'chain_wait', 'chain_ok')
  end
else
  local t = cjson.decode(sig)  -- [cron, every, at, tz]
  local own = (t[1] ~= cjson.null and t[1] ~= '') or (t[2] ~= cjson.null and t[2] ~= '')
    or (t[3] ~= cjson.null and t[3] ~= '')
  redis.call('HSET', jk, 'upstreams', upstreams, 'chain', own and 'trigger' or 'upstreams')
  if not own then redis.call('HDEL', jk, 'chain_wait') end
end
for i = FIRST_ARG, #ARGV, 2 do redis.call('HSET', jk, 'args:' .. ARGV[i], ARGV[i + 1]) end
-- register the job's queues now, so creating a run need not
for _, row in ipairs(rows) do redis.call('SADD', key_queues(), row.queue) end
local scheduled = redis.call('ZSCORE', key_schedule(), job_id)
if paused == '1' or next_fire == '' then
  redis.call('ZREM', key_schedule(), job_id)
  redis.call('HSET', jk, 'next_fire', next_fire)
elseif change == 'created' or old[2] ~= sig or not scheduled then
  redis.call('ZADD', key_schedule(), next_due, job_id)
  redis.call('HSET', jk, 'next_fire', next_fire)
end
return {job_id, version, change}
