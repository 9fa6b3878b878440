--[[ dlq_discard: take dead instances out of the DLQ for good.
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2..] iids
  Returns: one entry per iid: 1 = discarded, 0 = left alone (not dead, or unknown).
  A discarded instance ends 'cancelled' with the error "discarded from the DLQ"
  (no state of its own: to its run and to result() it is work that will not run,
  as a cancel of dead work already is).  A run's task is recounted from failed
  to cancelled and its run moves on as cancel_instance does it.
  Upholds: one place per instance (the DLQ entry is removed in the same step). ]]
-- @include lib/clock.lua
-- @include lib/cancel_instance.lua
-- @include lib/followup.lua

local now = now_ms(ARGV[1])

local out = {}
for i = 2, #ARGV do
  local iid = ARGV[i]
  local ti = key_ti(iid)
  if redis.call('HGET', ti, 'state') == 'dead' then
    redis.call('HSET', ti, 'error', 'discarded from the DLQ')
    cancel_instance(iid, now)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
follow_flush(now)
return out
