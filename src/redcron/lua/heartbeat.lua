--[[ heartbeat: renew every lease one worker holds on this shard, in one call.
  KEYS[1] shard prefix
  ARGV[1] worker_id
  ARGV[2] lease_ttl_ms
  ARGV[3] now_override_ms ("" = server TIME)
  ARGV[4..] pairs: iid, epoch
  Returns: { lost = {iid...}, revoked = {iid...} } as a two-element array.
  Ownership (state, worker, epoch) is verified before an entry is touched; a
  lost lease is left alone.  A revoked (cancel requested) lease is still
  renewed: it holds until the worker reports or the deadline passes.
  Upholds: invariants 3, 8. ]]
-- @include lib/common.lua

local worker = ARGV[1]
local deadline = now_ms(ARGV[3]) + tonumber(ARGV[2])
local lost, revoked = {}, {}
for i = 4, #ARGV, 2 do
  local iid, epoch = ARGV[i], ARGV[i + 1]
  local ti = key_ti(iid)
  local f = redis.call('HMGET', ti, 'state', 'worker', 'epoch', 'tenant', 'cancel_requested')
  if (f[1] == 'leased' or f[1] == 'running') and f[2] == worker and f[3] == epoch then
    redis.call('HSET', ti, 'deadline', deadline)
    redis.call('ZADD', key_leases(), 'XX', deadline, iid)
    redis.call('ZADD', key_tleases(f[4]), 'XX', deadline, iid)
    if f[5] == '1' then revoked[#revoked + 1] = iid end
  else
    lost[#lost + 1] = iid
  end
end
return {lost, revoked}
