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
-- @include lib/wake.lua

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
      make_ready(ti, iid, f[3], tenant, f[4], now)
      wake(f[3], 1)
      woke = woke + 1
    end
  end
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
