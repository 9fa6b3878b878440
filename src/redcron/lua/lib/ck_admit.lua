--[[ ck_admit: a concurrency key at the moment lease.lua (lib/take.lua) reads an
  entry (lib/ckeys.lua has the keys and what frees a slot): the entry takes a
  free slot, or its instance waits at the tail of the key's list.  Waking a
  key's waiters is not the lease's work: when a lease call finds free slots
  with waiters ahead (a wake missed: a cap raised, a slot pruned) or gives a
  reservation back, it puts a ckwake:<json [tenant, name, ck, cap]> member on
  the timers, due now, and promote wakes them (lib/ckeys.lua ck_wake_due):
  within one maintenance interval, and the lease stays small. ]]

-- Ask promote to wake the key's waiters into its free slots (due now).
local function ck_wake_later(tenant, name, ck, ckn, now)
  redis.call('ZADD', key_timers(), now, CKWAKE .. cjson.encode({tenant, name, ck, ckn or ''}))
end

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
  -- they go first, woken by promote
  if held < cap then ck_wake_later(tenant, name, ck, ckn, now) end
  return false
end

-- A woken waiter that lease.lua sets aside (held, quarantined) gives its
-- reserved slot back; promote wakes the next waiter into it.
local function ck_give_back(tenant, name, ck, ckn, iid, now)
  if redis.call('ZREM', key_ckslots(tenant, name, ck), iid) == 1 then
    ck_wake_later(tenant, name, ck, ckn, now)
  end
end
