--[[ reap: end expired leases (the worker is gone or stuck) and retry or dead-letter them.
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] limit (<= 500)
  ARGV[3] jitter fraction [0,1) for the retry backoff
  Returns: {reaped, next_deadline_ms or -1}
  Each lease's own deadline decides (workers may use different TTLs), read
  from the shard's lease index; an index entry for an instance that is no
  longer leased is dropped, one that lags a live lease's deadline is re-synced.
  The attempt ends 'lost', or 'timed_out' when it has been running (since
  a:<n>:started, else a:<n>:leased) for at least the task's timeout_ms.
  Upholds: invariants 3, 4, 5, 8. ]]
-- @include lib/common.lua

local now = now_ms(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', key_leases(), '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, iid in ipairs(due) do
  local ti = key_ti(iid)
  local f = redis.call('HMGET', ti, 'state', 'deadline', 'tenant', 'timeout_ms', 'attempt')
  if (f[1] == 'leased' or f[1] == 'running') and tonumber(f[2] or '0') <= now then
    redis.call('HINCRBY', key_stats(), 'lease_expired', 1)
    local outcome, why = 'lost', 'lease expired (worker lost or stuck)'
    local timeout = tonumber(f[4] or '0') or 0
    if timeout > 0 then
      local pre = 'a:' .. f[5] .. ':'
      local s = redis.call('HMGET', ti, pre .. 'started', pre .. 'leased')
      local since = tonumber(s[1] or s[2] or '')
      if since and now - since >= timeout then
        outcome = 'timed_out'
        why = 'lease expired after the task ran past its timeout of ' .. timeout .. ' ms'
      end
    end
    end_attempt(ti, iid, outcome, why, '1', '', '', now, ARGV[3])
    n = n + 1
  elseif (f[1] == 'leased' or f[1] == 'running') and tonumber(f[2] or '') then
    -- a live lease whose index entry lags its hash: re-sync it, never drop it
    -- (a dropped entry would leave the lease unreapable if its worker dies)
    redis.call('ZADD', key_leases(), f[2], iid)
    redis.call('ZADD', key_tleases(f[3]), f[2], iid)
  else
    redis.call('ZREM', key_leases(), iid)
    if f[3] then redis.call('ZREM', key_tleases(f[3]), iid) end
  end
end
local nxt = redis.call('ZRANGE', key_leases(), 0, 0, 'WITHSCORES')
return {n, tonumber(nxt[2] or '-1')}
