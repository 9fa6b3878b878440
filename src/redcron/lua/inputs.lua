--[[ inputs: what tasks of runs receive from their run, in one call: the run's
  params and the result of each of the task's upstream tasks (issue 32 §1, §3).
  KEYS[1] shard prefix
  ARGV[1..] iids: tasks of runs on this shard (<run id>/<task>); a one-off
  task's id reads an empty row
  Returns: one row per iid, {params, name, result, name, result, ...}: the
  run's params (JSON text; nil when the run has none), then each upstream
  task in the order of the task's deps, with its result (msgpack; nil when
  its record holds none: not succeeded, or gone with its run's retention).
  Mapped tasks (issue 32 §2): an upstream that is a mapped task gives the
  list of its instances' results, in order (nil for one without a result);
  an instance <task>[i] of a mapped task has its task's deps, and the
  upstream it is mapped over gives its element instead (a map over a param
  comes first, named params.<name>).
  Reads only: a task's inputs are read once per attempt, by its worker or by
  the HTTP lease that hands it out. ]]
-- @include lib/lists.lua

local out = {}
for i = 1, #ARGV do
  local iid = ARGV[i]
  local run_id, task = run_of_task(iid)
  local row = {false}
  if run_id then
    row[1] = redis.call('HGET', key_run(run_id), 'params')
    local node = string.match(task, MAPPED)
    local f = redis.call('HMGET', key_ti(run_id .. '/' .. (node or task)), 'deps', 'map_over')
    local over = node and f[2]
    if over and string.sub(over, 1, 7) == 'params.' then
      row[2], row[3] = over, redis.call('HGET', key_ti(iid), 'item')
    end
    for _, name in ipairs(split(f[1])) do
      local dk = key_ti(run_id .. '/' .. name)
      local d = redis.call('HMGET', dk, 'result', 'map_n')
      if name == over then
        d[1] = redis.call('HGET', key_ti(iid), 'item')
      elseif d[2] then
        local each = run_id .. '/' .. name .. '['
        d[1] = {}
        for j = 1, tonumber(d[2]) do
          d[1][j] = redis.call('HGET', key_ti(each .. (j - 1) .. ']'), 'result')
        end
      end
      row[#row + 1] = name
      row[#row + 1] = d[1]
    end
  end
  out[i] = row
end
return out
