--[[ cancel: cancel one instance wherever it is.
  KEYS[1] shard prefix
  ARGV[1] iid
  ARGV[2] now_override_ms ("" = server TIME)
  Returns: the resulting state: 'cancelled' (ready, timer or DLQ work removed at
  once), 'cancel_requested' (running: the next heartbeat revokes it and the
  worker kills it), or the terminal state it already had.
  Errors: NOTFOUND.
  A task of a run moves its run on (its pending downstream is cancelled).
  Upholds: one place per instance (taken off its stream, timer or DLQ in the
  same step); each attempt ends once (running work ends when it reports). ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/cancel_instance.lua

local iid = ARGV[1]
local now = now_ms(ARGV[2])

local state = cancel_instance(iid, now)
if not state then return err('NOTFOUND', 'no task ' .. iid) end
return state
