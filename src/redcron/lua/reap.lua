--[[ reap: end expired leases (the worker is gone or stuck) and retry or dead-letter them.
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] limit (<= 500)
  ARGV[3] jitter fraction [0,1) for the retry backoff
  Returns: {reaped, next_deadline_ms or -1}
  Each lease's own deadline decides (workers may use different TTLs), read
  from the shard's lease index; an index entry that disagrees with its hash is
  dropped.  The attempt ends 'lost' (timed_out if it ran past its timeout).
  Upholds: invariants 3, 4, 5, 8. ]]
-- @include lib/common.lua

local now = now_ms(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', key_leases(), '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, iid in ipairs(due) do
  local ti = key_ti(iid)
  local f = redis.call('HMGET', ti, 'state', 'deadline', 'tenant')
  if (f[1] == 'leased' or f[1] == 'running') and tonumber(f[2] or '0') <= now then
    redis.call('HINCRBY', key_stats(), 'lease_expired', 1)
    end_attempt(ti, iid, 'lost', 'lease expired (worker lost or stuck)', '1', '', '', now, ARGV[3])
    n = n + 1
  else
    redis.call('ZREM', key_leases(), iid)
    if f[3] then redis.call('ZREM', key_tleases(f[3]), iid) end
  end
end
local nxt = redis.call('ZRANGE', key_leases(), 0, 0, 'WITHSCORES')
return {n, tonumber(nxt[2] or '-1')}
