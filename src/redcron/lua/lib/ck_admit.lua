--[[ ck_admit: a concurrency key at the moment lease.lua (lib/take.lua) reads an
  entry (lib/ckeys.lua has the keys and what frees a slot): the entry takes a
  free slot, or its instance waits at the tail of the key's list. ]]
-- @include lib/ckeys.lua

-- Drop the members of a full key's slots that hold none: an instance neither
-- leased nor ready (a reservation) on this key any more, or gone (a hand edit,
-- an expired hash).  Only members whose score (deadline, or wake time) is past
-- are read, so a key's live leases cost nothing here.
local function ck_prune(sk, name, ck, now)
  local stale = redis.call('ZRANGEBYSCORE', sk, '-inf', now, 'LIMIT', 0, 64)
  for _, iid in ipairs(stale) do
    local f = redis.call('HMGET', key_ti(iid), 'state', 'name', 'ck')
    local holds = (TASK_LEASED[f[1]] or f[1] == 'ready') and f[2] == name and f[3] == ck
    if not holds then redis.call('ZREM', sk, iid) end
  end
end

-- May this entry's instance be leased now?  True: it holds a slot (its
-- reservation, or a free one: scored with the lease deadline).  False: it was
-- set to wait at the tail (the caller drops its stream entry).  `seen` caches
-- the prune per key for one lease call.
local function ck_admit(seen, ti, iid, tenant, name, ck, ckn, deadline, now)
  local sk, qk = key_ckslots(tenant, name, ck), key_ckwaiting(tenant, name, ck)
  local cap = tonumber(ckn or '') or 1
  if redis.call('ZSCORE', sk, iid) then
    redis.call('ZADD', sk, deadline, iid)
    return true
  end
  local held = redis.call('ZCARD', sk)
  if held >= cap and not seen[sk] then
    seen[sk] = true
    ck_prune(sk, name, ck, now)
    held = redis.call('ZCARD', sk)
  end
  local waiting = redis.call('LLEN', qk)
  if held < cap and waiting == 0 then
    redis.call('ZADD', sk, deadline, iid)
    return true
  end
  redis.call('RPUSH', qk, iid)
  redis.call('HSET', ti, 'state', 'waiting', 'loc', 'ckq')
  -- free slots with waiters ahead (a wake missed: a cap raised, a slot pruned):
  -- they go first
  if held < cap then ck_wake(tenant, name, ck, cap - held, now) end
  return false
end
