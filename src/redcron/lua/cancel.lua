--[[ cancel: cancel one instance wherever it is.
  KEYS[1] shard prefix
  ARGV[1] iid
  ARGV[2] now_override_ms ("" = server TIME)
  Returns: {state, how}: how 1 = cancelled now (ready, timer, held or DLQ work
  taken out of its place), 2 = cancelled now while leased (the attempt ends
  'cancelled' at once and its lease with it; the worker's report is refused,
  its next heartbeat answers revoked and it kills what it can: the code may
  still be running), 0 = it had already ended: state is its terminal state and
  nothing was written.
  Errors: NOTFOUND.
  A task of a run moves its run on (its pending downstream is cancelled).
  Upholds: one place per instance (taken off its stream, timer, lease or DLQ in
  the same step); each attempt ends once (here, for the running one); a stale
  token writes nothing (a cancelled lease is no longer leased). ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/cancel_instance.lua
-- @include lib/followup.lua

local iid = ARGV[1]
local now = now_ms(ARGV[2])

local state, now_ended, was_leased = cancel_instance(iid, now)
if not state then return err('NOTFOUND', 'no task ' .. iid) end
if not now_ended then return {state, 0} end
follow_flush(now)
return {state, was_leased and 2 or 1}
