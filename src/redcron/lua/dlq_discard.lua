--[[ dlq_discard: take dead instances out of the DLQ for good.
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] the only tenant whose instances may be acted on ("" = any: the admin)
  ARGV[3..] iids
  Returns: one entry per iid: its tenant = discarded, 0 = left alone (not dead,
  unknown, or another tenant's).
  A discarded instance ends 'cancelled' with the error "discarded from the DLQ"
  (no state of its own: to its run and to result() it is work that will not run,
  as a cancel of dead work already is).  A run's task is recounted from failed
  to cancelled and its run moves on as cancel_instance does it.
  Upholds: one place per instance (the DLQ entry is removed in the same step);
  a tenant's caller acts on its own instances only, checked here, in the same
  step (no read per id before the call). ]]
-- @include lib/clock.lua
-- @include lib/cancel_instance.lua
-- @include lib/followup.lua

local now, only = now_ms(ARGV[1]), ARGV[2]

local out = {}
for i = 3, #ARGV do
  local iid = ARGV[i]
  local ti = key_ti(iid)
  local state, tenant = unpack(redis.call('HMGET', ti, 'state', 'tenant'))
  if state == 'dead' and (only == '' or tenant == only) then
    redis.call('HSET', ti, 'error', 'discarded from the DLQ')
    cancel_instance(iid, now)
    out[#out + 1] = tenant or ''
  else
    out[#out + 1] = 0
  end
end
follow_flush(now)
return out
