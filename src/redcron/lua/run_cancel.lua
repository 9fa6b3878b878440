--[[ run_cancel: cancel a run: ready, waiting and dead work at once, running work
  revoked through heartbeats (the run ends when those attempts report or expire).
  KEYS[1] shard prefix
  ARGV[1] run_id   ARGV[2] now_override_ms
  Returns: {run state after the call, tasks still running}
  Errors: NOTFOUND. ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/lists.lua
-- @include lib/cancel_instance.lua

local run_id = ARGV[1]
local now = now_ms(ARGV[2])
local rk = key_run(run_id)
local f = redis.call('HMGET', rk, 'state', 'tasks')
if not f[1] then return err('NOTFOUND', 'no run ' .. run_id) end
if not RUN_ACTIVE[f[1]] then return {f[1], 0} end
redis.call('HSET', rk, 'cancel_requested', '1')
local running = 0
for _, t in ipairs(split(f[2])) do
  if cancel_instance(run_id .. '/' .. t, now) == 'cancel_requested' then running = running + 1 end
end
return {redis.call('HGET', rk, 'state'), running}
