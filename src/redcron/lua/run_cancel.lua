--[[ run_cancel: cancel a run: every live instance ends cancelled at once (ready,
  waiting and dead work taken out of its place; a leased attempt ends with its
  lease, the worker's report refused), so the run ends cancelled in this call.
  KEYS[1] shard prefix
  ARGV[1] run_id   ARGV[2] now_override_ms
  Returns: {run state after the call, 1 = cancelled now | 0 = it had already
  ended (nothing written), {tasks whose code may still be running}} (the
  tasks that were leased: their workers stop them at their next heartbeat).
  Errors: NOTFOUND.
  Upholds: one place per instance; each attempt ends once. ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/cancel_instance.lua
-- @include lib/mapped.lua
-- @include lib/followup.lua

local run_id = ARGV[1]
local now = now_ms(ARGV[2])
local rk = key_run(run_id)
local f = redis.call('HMGET', rk, 'state', 'tasks')
if not f[1] then return err('NOTFOUND', 'no run ' .. run_id) end
if not RUN_ACTIVE[f[1]] then return {f[1], 0, {}} end
redis.call('HSET', rk, 'cancel_requested', '1')
local running = {}
for _, iid in ipairs(run_iids(run_id, f[2])) do  -- a mapped task's instances too
  local _, _, was_leased = cancel_instance(iid, now)
  if was_leased then running[#running + 1] = select(2, run_of_task(iid)) end
end
follow_flush(now)
return {redis.call('HGET', rk, 'state'), 1, running}
