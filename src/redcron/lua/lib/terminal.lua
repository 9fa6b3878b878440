--[[ terminal: an instance reaches succeeded or cancelled: its hash gets the
  result retention, result() waiters are woken and its run moves on. ]]
-- @include lib/waiters.lua
-- @include lib/runs.lua

local function make_terminal(ti, iid, state, now)
  redis.call('HSET', ti, 'state', state, 'loc', '', 'ended', now, 'deadline', '')
  local ttl = tonumber(redis.call('HGET', ti, 'result_ttl_s') or '0')
  if ttl and ttl > 0 then redis.call('EXPIRE', ti, ttl) end
  notify_done(ti, iid)
  run_task_ended(ti, iid, state, now)
end
