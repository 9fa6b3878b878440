--[[ ck_due: a ckwake:<json [tenant, name, ck, cap]> timer (lib/ck_admit.lua)
  is due, in promote: the key's slots are pruned of members that hold none,
  then its waiters are woken into the free slots.  lease.lua only asks for
  this (it stays small); a waiter whose slot leaked waits at most one
  maintenance interval longer. ]]
-- @include lib/ckeys.lua

-- Drop the members of a key's slots that hold none: an instance neither
-- leased nor ready (a reservation) on this key any more, or gone (a hand edit,
-- an expired hash).  A woken waiter whose task has a rate keeps its
-- reservation while it waits on the timers for its turn (scheduled,
-- lib/rate.lua): a slot ends only with a lease (ck_free) or a cancel.  Only members whose score (deadline, or wake time) is past
-- are read, so a key's live leases cost nothing here.
local function ck_prune(sk, name, ck, now)
  local stale = redis.call('ZRANGEBYSCORE', sk, '-inf', now, 'LIMIT', 0, 64)
  for _, iid in ipairs(stale) do
    local f = redis.call('HMGET', key_ti(iid), 'state', 'name', 'ck')
    local holds = (TASK_LEASED[f[1]] or f[1] == 'ready' or f[1] == 'scheduled')
      and f[2] == name and f[3] == ck
    if not holds then redis.call('ZREM', sk, iid) end
  end
end

-- A ckwake:<json> timer of lib/ck_admit.lua is due: prune the key's slots,
-- then wake its waiters into the free ones (none free, or nobody waiting: nothing).
local function ck_wake_due(json, now)
  local ok, k = pcall(cjson.decode, json)
  if not ok or type(k) ~= 'table' or not k[3] then return end
  local tenant, name, ck = tostring(k[1]), tostring(k[2]), tostring(k[3])
  local sk = key_ckslots(tenant, name, ck)
  ck_prune(sk, name, ck, now)
  local free = (tonumber(k[4] or '') or 1) - redis.call('ZCARD', sk)
  if free > 0 then ck_wake(tenant, name, ck, free, now) end
end

