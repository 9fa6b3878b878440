--[[ cancel: cancel one instance wherever it is.
  KEYS[1] shard prefix
  ARGV[1] iid
  ARGV[2] now_override_ms ("" = server TIME)
  Returns: the resulting state: 'cancelled' (ready, timer or DLQ work removed at
  once), 'cancel_requested' (running: the next heartbeat revokes it and the
  worker kills it), or the terminal state it already had.
  Errors: NOTFOUND.
  Upholds: invariants 4, 5. ]]
-- @include lib/common.lua

local iid = ARGV[1]
local ti = key_ti(iid)
local now = now_ms(ARGV[2])
local f = redis.call('HMGET', ti, 'state', 'loc', 'queue', 'tenant', 'prio', 'attempt')
local state, loc = f[1], f[2] or ''
if not state then return err('NOTFOUND', 'no task ' .. iid) end
if state == 'succeeded' or state == 'failed' or state == 'cancelled' then return state end
if state == 'leased' or state == 'running' then
  redis.call('HSET', ti, 'cancel_requested', '1')
  return 'cancel_requested'
end
if state == 'ready' then
  local stream = key_q(f[3], f[4], f[5])
  redis.call('XDEL', stream, string.sub(loc, 3))
  if redis.call('XLEN', stream) == 0 then redis.call('ZREM', key_ring(f[3], f[5]), f[4]) end
elseif state == 'retry_wait' or state == 'scheduled' then
  redis.call('ZREM', key_timers(), iid)
elseif state == 'dead' then
  redis.call('XDEL', key_dlq(f[4]), string.sub(loc, 5))
end
redis.call('HSET', ti, 'cancel_requested', '1')
make_terminal(ti, iid, 'cancelled', now)
return 'cancelled'
