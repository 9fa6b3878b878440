--[[ doctor_run: recount one run from its task instances and set what follows:
  its counters, its membership of active:<job>, a pending task whose
  dependencies all succeeded made ready (the fan-in that did not happen), and
  the run's end when every task has ended (run_check_end, as the scripts that
  end instances do).
  KEYS[1] shard prefix
  ARGV[1] run id
  ARGV[2] now_override_ms ("" = server TIME)
  Returns: {word, tasks made ready}; word: recounted (counters or active:<job>
  membership rewritten) |
  in_place | gone (no run hash: dropped from active:<job>) | ended (a run that
  has ended: dropped from active:<job>) | task_missing (a task has no hash:
  counters left alone).
  Upholds: a run ends when no instance can progress; fan-in makes a task ready
  once (a pending task never ran, so readying it cannot run anything twice). ]]
-- @include lib/clock.lua
-- @include lib/lists.lua
-- @include lib/streams.lua
-- @include lib/rings.lua
-- @include lib/runs.lua
-- @include lib/followup.lua
-- @include lib/mapped.lua

local run_id = ARGV[1]
local now = now_ms(ARGV[2])
local rk = key_run(run_id)
local r = read_run_doctor(rk)
local job_id = r[RUN_DOCTOR_JOB] or job_of_run(run_id)
if not r[RUN_DOCTOR_STATE] then
  if job_id then redis.call('SREM', key_active(job_id), run_id) end
  return {'gone', 0}
end
if not RUN_ACTIVE[r[RUN_DOCTOR_STATE]] then
  redis.call('SREM', key_active(job_id), run_id)
  return {'ended', 0}
end
local word = 'in_place'
if redis.call('SADD', key_active(job_id), run_id) == 1 then word = 'recounted' end
local names = split(r[RUN_DOCTOR_TASKS])
local states = {}
local all = run_iids(run_id, r[RUN_DOCTOR_TASKS])  -- a mapped task's instances too
for _, iid in ipairs(all) do
  local st = redis.call('HGET', key_ti(iid), 'state')
  if not st then return {'task_missing', 0} end
  states[select(2, run_of_task(iid))] = st
end
-- the fan-in that did not happen: every dependency succeeded, still pending
local readied = 0
for _, t in ipairs(names) do
  if states[t] == 'pending' then
    local iid = run_id .. '/' .. t
    local ti = key_ti(iid)
    local met = true
    for _, d in ipairs(split(redis.call('HGET', ti, 'deps'))) do
      if states[d] ~= 'succeeded' then met = false end
    end
    if met then
      local g = redis.call('HMGET', ti, 'queue', 'tenant', 'priority', 'map_over')
      if g[4] then  -- a mapped task: a follow-up makes its instances
        redis.call('HSET', ti, 'state', 'mapping', 'deps_left', 0)
        follow('map', {iid})
        states[t] = 'mapping'
      else
        make_ready(ti, iid, g[1], g[2], g[3], now)  -- drops deps_left (0: its default)
        wake(g[1], 1)
        states[t] = 'ready'
      end
      readied = readied + 1
    end
  end
end
local done, ok, failed, cancelled = 0, 0, 0, 0
for _, st in pairs(states) do
  if st == 'succeeded' then
    ok = ok + 1
  elseif st == 'dead' or st == 'failed' or st == 'upstream_failed' then
    failed = failed + 1
  elseif st == 'cancelled' or st == 'skipped' then
    cancelled = cancelled + 1
  end
end
done = ok + failed + cancelled
local want = {#all, done, ok, failed, cancelled}
local have = {r[RUN_DOCTOR_TOTAL], r[RUN_DOCTOR_N_DONE], r[RUN_DOCTOR_N_SUCCEEDED],
  r[RUN_DOCTOR_N_FAILED], r[RUN_DOCTOR_N_CANCELLED]}
for i = 1, 5 do
  -- a counter at 0 is left out of the hash (lib/run_create.lua): absent reads 0
  if tonumber(have[i] or '0') ~= want[i] then word = 'recounted' end
end
if word == 'recounted' then
  local names, set, zero = {'total', 'n_done', 'n_succeeded', 'n_failed', 'n_cancelled'}, {}, {}
  for i = 1, 5 do
    if i > 1 and want[i] == 0 then
      zero[#zero + 1] = names[i]
    else
      set[#set + 1] = names[i]
      set[#set + 1] = want[i]
    end
  end
  redis.call('HSET', rk, unpack(set))
  if #zero > 0 then redis.call('HDEL', rk, unpack(zero)) end
end
run_check_end(run_id, now)
follow_flush(now)
return {word, readied}
