--[[ ck_admit: a concurrency key at the moment lease.lua (lib/take.lua) reads an
  entry (lib/ckeys.lua has the keys and what frees a slot): the entry takes a
  free slot, or its instance waits at the tail of the key's list.  Waking a
  key's waiters is not the lease's work, nor pruning a full key's slots of
  members that hold none (a leak): when a lease call sets an instance to wait,
  or gives a reservation back, it puts a ckwake:<json [tenant, name, ck, cap]>
  member on the timers, due now, and promote prunes the key and wakes its
  waiters into the free slots (lib/ck_due.lua): within one maintenance
  interval, and the lease stays small. ]]

-- Ask promote to wake the key's waiters into its free slots (due now).
local function ck_wake_later(tenant, name, ck, ckn, now)
  redis.call('ZADD', key_timers(), now, CKWAKE .. cjson.encode({tenant, name, ck, ckn or ''}))
end

-- May this entry's instance be leased now?  True: it holds a slot (its
-- reservation, or a free one: scored with the lease deadline).  False: it was
-- set to wait at the tail (the caller drops its stream entry).
local function ck_admit(ti, iid, tenant, name, ck, ckn, deadline, now)
  local sk, qk = key_ckslots(tenant, name, ck), key_ckwaiting(tenant, name, ck)
  local cap = tonumber(ckn or '') or 1
  if redis.call('ZSCORE', sk, iid) then
    redis.call('ZADD', sk, deadline, iid)
    return true
  end
  local held = redis.call('ZCARD', sk)
  local waiting = redis.call('LLEN', qk)
  if held < cap and waiting == 0 then
    redis.call('ZADD', sk, deadline, iid)
    return true
  end
  redis.call('RPUSH', qk, iid)
  redis.call('HSET', ti, 'state', 'waiting', 'loc', 'ckq')
  -- promote looks at the key (within one maintenance interval): free slots
  -- with waiters ahead (a wake missed: a cap raised) go to them, and a full
  -- key's members that hold no slot any more are pruned first (lib/ck_due.lua)
  ck_wake_later(tenant, name, ck, ckn, now)
  return false
end

-- A woken waiter that lease.lua sets aside (held, quarantined) gives its
-- reserved slot back; promote wakes the next waiter into it.
local function ck_give_back(tenant, name, ck, ckn, iid, now)
  if redis.call('ZREM', key_ckslots(tenant, name, ck), iid) == 1 then
    ck_wake_later(tenant, name, ck, ckn, now)
  end
end
