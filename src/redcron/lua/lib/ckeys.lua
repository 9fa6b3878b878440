--[[ ckeys: concurrency keys (a task's concurrency_key / max_concurrent).  An
  instance with a key has ck (the key's value) and ckn (its cap N) in its
  hash.  While leased it holds one of the N slots of ckslots:<tenant>:<name>:<ck>
  (ZSET: instance id -> its lease deadline), counted as leases counts a
  tenant's cap: by members, not a counter.  lease.lua (lib/take.lua) takes a
  slot for an entry it reads when fewer than N are held and nobody waits;
  otherwise the entry leaves its stream and the instance waits (state
  waiting, loc ckq) at the tail of ckwaiting:<tenant>:<name>:<ck> (LIST, oldest
  first), so other keys' work behind it flows past.  Whatever ends the lease
  (complete, fail, release, reap, cancel: ck_free) gives the slot back and
  makes the first waiter ready again *in* that slot (member with the time it
  was woken: a reservation, so a later arrival cannot overtake it); its lease
  keeps the slot.  The cap is never passed: a member is added only under it. ]]
-- @include lib/rings.lua

-- waiters woken by one call at most beyond the slots freed (stale entries
-- of instances gone from the list's state are skipped within this bound)
local CK_WAKE_SLACK = 16

-- Make up to n of a key's waiters ready, oldest first, each in a reserved slot.
local function ck_wake(tenant, name, ck, n, now)
  local qk, sk = key_ckwaiting(tenant, name, ck), key_ckslots(tenant, name, ck)
  local woke, looked = 0, 0
  while woke < n and looked < n + CK_WAKE_SLACK do
    looked = looked + 1
    local iid = redis.call('LPOP', qk)
    if not iid then break end
    local ti = key_ti(iid)
    local f = redis.call('HMGET', ti, 'state', 'loc', 'queue', 'priority')
    if f[1] == 'waiting' and f[2] == 'ckq' then
      redis.call('ZADD', sk, now, iid)
      make_ready(ti, iid, f[3], tenant, f[4])
      wake(f[3], 1)
      woke = woke + 1
    end
  end
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
  -- they go first
  if held < cap then ck_wake(tenant, name, ck, cap - held, now) end
  return false
end

-- A lease (or a reservation) on a key ended: its slot goes to the first waiter.
local function ck_free(tenant, name, ck, ckn, iid, now)
  if not ck or ck == '' then return end
  local sk = key_ckslots(tenant, name, ck)
  if redis.call('ZREM', sk, iid) == 0 then return end
  local free = (tonumber(ckn or '') or 1) - redis.call('ZCARD', sk)
  if free > 0 then ck_wake(tenant, name, ck, free, now) end
end

-- A waiting instance leaves its key's list (cancelled).
local function ck_unwait(tenant, name, ck, iid)
  redis.call('LREM', key_ckwaiting(tenant, name, ck), 0, iid)
end
