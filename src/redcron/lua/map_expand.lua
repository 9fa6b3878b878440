--[[ map_expand: make one page of a mapped task's instances (issue 32 §2), for
  the follow-up of kind map its dependencies' success wrote (lib/runs.lua; for
  a map over a param, its run's start: lib/run_create.lua).  Maintenance
  (Maintenance.expand_map) reads the list, checks it and calls this page by
  page, so a large map is never one unbounded call; each page is fenced by
  the task's map_made, so a page made already, or by another caller, is not
  made twice.
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] the mapped task's iid (<run id>/<task>)
  ARGV[3] the index of the page's first element: the task's map_made so far
  ARGV[4] how many elements in all (-1: the map cannot be made; ARGV[5] says why)
  ARGV[5..] the page's elements (msgpack each), or the error
  Returns: the task's map_made after the call; -1 when nothing was written (the
  task is not mapping: ended, cancelled, gone; or another caller made the page).
  Each instance <task>[i] copies the task's routing, retries and keys, holds
  its element as item (inputs.lua hands it over as the mapped upstream's
  result) and is made ready (or waits for its rate's turn); the run's total
  counts it.  The first page sets map_n and lists the task in the run's
  mapped; an empty list ends the task succeeded, a map that cannot be made
  ends it failed with the error (its downstream upstream_failed).
  Upholds: fan-out made once per element; one place per instance. ]]
-- @include lib/clock.lua
-- @include lib/rings.lua
-- @include lib/runs.lua
-- @include lib/waiters.lua
-- @include lib/wake.lua
-- @include lib/ti_fields.lua
-- @include lib/followup.lua

local now = now_ms(ARGV[1])
local pid, start, n = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local run_id, task = run_of_task(pid)
local pk = key_ti(pid)
local COPY = {'name', 'kind', 'args', 'queue', 'tenant', 'priority', 'max_attempts', 'timeout_ms',
  'retry_base_ms', 'retry_cap_ms', 'cpu', 'mem', 'ck', 'ckn', 'traceparent', 'tracestate',
  'rate_ms', 'rate_n', 'rate_key', 'rate_group'}
local p = redis.call('HMGET', pk, 'state', 'map_made', unpack(COPY))
if not run_id or p[1] ~= 'mapping' or tonumber(p[2] or '0') ~= start then return -1 end
local rk = key_run(run_id)

-- the task ends here: an empty list, or a map that cannot be made
local function end_task(state, why)
  redis.call('HSET', pk, 'state', state, 'ended', now)
  if why then redis.call('HSET', pk, 'error', why) end
  notify_done(pk, pid)
  run_task_ended(pk, pid, state, now)
  follow_flush(now)
  return 0
end

if n < 0 then return end_task('failed', ARGV[5]) end
if start == 0 then
  redis.call('HSET', pk, 'map_n', n, 'map_made', 0)
  local mapped = redis.call('HGET', rk, 'mapped')
  redis.call('HSET', rk, 'mapped', mapped and (mapped .. ',' .. task) or task)
  if n == 0 then return end_task('succeeded') end
end
local fields = {'created', now, 'attempt', 0, 'epoch', 0, 'state', 'pending'}
for i, name in ipairs(COPY) do
  if p[i + 2] then push_field(fields, name, p[i + 2]) end
end
local item = #fields + 2  -- the value of field item, set per instance
push_field(fields, 'item', '')
local queue, tenant, priority = p[6], p[7], p[8]
for i = 5, #ARGV do
  local iid = pid .. '[' .. (start + i - 5) .. ']'
  local ti = key_ti(iid)
  fields[item] = ARGV[i]
  redis.call('HSET', ti, unpack(fields))
  make_ready(ti, iid, queue, tenant, priority, now)
end
local made = start + #ARGV - 4
redis.call('HINCRBY', rk, 'total', #ARGV - 4)
redis.call('HSET', pk, 'map_made', made)
if #ARGV > 4 then wake(queue, #ARGV - 4) end
return made
