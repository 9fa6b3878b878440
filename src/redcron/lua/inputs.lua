--[[ inputs: what tasks of runs receive from their run, in one call: the run's
  params and the result of each of the task's upstream tasks (issue 32 §1, §3).
  KEYS[1] shard prefix
  ARGV[1..] iids: tasks of runs on this shard (<run id>/<task>); a one-off
  task's id reads an empty row
  Returns: one row per iid, {params, name, result, name, result, ...}: the
  run's params (JSON text; nil when the run has none), then each upstream
  task in the order of the task's deps, with its result (msgpack; nil when
  its record holds none: not succeeded, or gone with its run's retention).
  Reads only: a task's inputs are read once per attempt, by its worker or by
  the HTTP lease that hands it out. ]]
-- @include lib/lists.lua

local out = {}
for i = 1, #ARGV do
  local iid = ARGV[i]
  local run_id = run_of_task(iid)
  local row = {false}
  if run_id then
    row[1] = redis.call('HGET', key_run(run_id), 'params')
    for _, name in ipairs(split(redis.call('HGET', key_ti(iid), 'deps'))) do
      row[#row + 1] = name
      row[#row + 1] = redis.call('HGET', key_ti(run_id .. '/' .. name), 'result')
    end
  end
  out[i] = row
end
return out
