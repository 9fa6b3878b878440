--[[ mapped: the instances of a run's mapped tasks (issue 32 §2).  A mapped
  task <task> of a run has made map_made instances, <run id>/<task>[0]...; the
  run's field mapped lists its mapped tasks once they have made some, so what
  reaches every instance of a run (cancel, retry, retention) reads no other
  task's hash. ]]
-- @include lib/lists.lua

-- The instance ids of a run's tasks `names` (a comma list), each mapped task's
-- instances before the task itself.
local function run_iids(run_id, names)
  local out, mapped = {}, {}
  for _, m in ipairs(split(redis.call('HGET', key_run(run_id), 'mapped'))) do mapped[m] = true end
  for _, t in ipairs(split(names)) do
    local iid = run_id .. '/' .. t
    if mapped[t] then
      local n = tonumber(redis.call('HGET', key_ti(iid), 'map_made') or '0')
      for i = 0, n - 1 do out[#out + 1] = iid .. '[' .. i .. ']' end
    end
    out[#out + 1] = iid
  end
  return out
end
