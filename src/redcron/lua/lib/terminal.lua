--[[ terminal: an instance reaches succeeded or cancelled: its hash gets the
  result retention, result() waiters are woken and its run moves on. ]]
-- @include lib/waiters.lua
-- @include lib/runs.lua

-- A terminal instance has no place and no lease: those fields go (an absent
-- field reads as empty).  Its holder stays: a cancelled attempt's worker is
-- answered revoked by heartbeat under it (a success drops it: lib/attempts.lua).
local function make_terminal(ti, iid, state, now)
  redis.call('HSET', ti, 'state', state, 'ended', now)
  redis.call('HDEL', ti, 'loc', 'deadline', 'lease_entry')
  local ttl = tonumber(redis.call('HGET', ti, 'result_ttl_s') or TI_DEFAULT_RESULT_TTL_S)
  if ttl and ttl > 0 then redis.call('EXPIRE', ti, ttl) end
  notify_done(ti, iid)
  run_task_ended(ti, iid, state, now)
end
