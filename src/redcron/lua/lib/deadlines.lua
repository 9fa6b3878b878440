--[[ deadlines: the per-shard index of the deadlines of runs not ended
  (docs/operations.md "Deadlines").  deadlines (ZSET): run id -> the ms by
  which the run is to end (its nominal fire time + the job's deadline_ms); the
  run hash's `deadline` holds the same.  Run creation arms it, every run end
  disarms it, deadline_sweep.lua pops what is due and marks those runs late. ]]

-- Arm the deadline of a new (or reopened) run: `due` ms.
local function deadline_arm(rk, run_id, due)
  redis.call('HSET', rk, 'deadline', due)
  redis.call('ZADD', key_deadlines(), due, run_id)
end

-- The run ended: its deadline no longer applies (a no-op without one).
local function deadline_disarm(run_id, deadline)
  if deadline and deadline ~= '' then redis.call('ZREM', key_deadlines(), run_id) end
end
