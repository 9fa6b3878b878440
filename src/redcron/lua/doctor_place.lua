--[[ doctor_place: put one instance back in the place its hash records, when
  that place lost it (a hand edit, a lost write): the inverse of the index
  checks of redcron doctor.
  KEYS[1] shard prefix
  ARGV[1] instance id
  ARGV[2] now_override_ms ("" = server TIME)
  ARGV[3] jitter fraction [0,1) for a retry's backoff (an expired lease ended here)
  Returns: what it did, one word:
    in_place       nothing to do on re-check
    requeued       ready, but no undelivered entry of its stream named it: a new
                   entry, the tenant on its ring and aging index, a worker woken
    entry_pending  ready, but its entry is delivered (pending) or its hash holds a
                   live deadline: a worker may hold it, left alone (the reaper drops
                   that entry; run doctor again after)
    timer_added    scheduled / retry_wait with no timer: timer at its due time
    lease_indexed  leased / running, missing from leases:<tenant>: added back at
                   its deadline (and its stream in the reaper's index)
    lease_live     leased / running with no pending stream entry, deadline still
                   ahead: left alone (the worker may report; else run doctor again
                   after the deadline)
    lease_ended:<state>  leased / running with no pending entry and its deadline
                   passed: the reaper can never see it, so the attempt ends 'lost'
                   exactly as reap.lua ends an expired lease (retry or DLQ)
    dlq_added      dead with no DLQ entry: a new self-contained entry
    held_added     held, missing from attention (held:<instance id>): added
    ckq_added      waiting, missing from its concurrency key's list ckwaiting:: appended
                   (and woken at once if the key has a free slot, lib/ckeys.lua)
    missing        no such instance
  Upholds: one place per instance; nothing that may be running is handed out
  again (a live deadline or a delivered entry blocks the requeue); each attempt
  ends once. ]]
-- @include lib/clock.lua
-- @include lib/streams.lua
-- @include lib/rings.lua
-- @include lib/attempts.lua
-- @include lib/dead.lua
-- @include lib/ckeys.lua
-- @include lib/followup.lua

local iid = ARGV[1]
local now = now_ms(ARGV[2])
local frac = ARGV[3] ~= '' and ARGV[3] or '0'
local ti = key_ti(iid)
local f = read_ti_place(ti)
local state, loc = f[TI_PLACE_STATE], f[TI_PLACE_LOC] or ''
if not state then return 'missing' end
local queue, tenant, priority = f[TI_PLACE_QUEUE], f[TI_PLACE_TENANT], f[TI_PLACE_PRIORITY]
local deadline = tonumber(f[TI_PLACE_DEADLINE] or '') or 0

local function names_me(stream, eid)
  local e = redis.call('XRANGE', stream, eid, eid)
  return e[1] ~= nil and e[1][2][2] == iid
end

local function delivered(stream, eid)
  return #redis.call('XPENDING', stream, GROUP, eid, eid, 1) > 0
end

if state == 'ready' then
  local stream = key_q(queue, tenant, priority)
  local eid = string.match(loc, '^q:(.+)$')
  if eid and names_me(stream, eid) then
    if not delivered(stream, eid) then return 'in_place' end
    return 'entry_pending'
  end
  if deadline > now then return 'entry_pending' end
  make_ready(ti, iid, queue, tenant, priority, now)
  wake(queue, 1)
  return 'requeued'
elseif state == 'scheduled' or state == 'retry_wait' then
  if redis.call('ZSCORE', key_timers(), iid) then return 'in_place' end
  local due = tonumber(f[TI_PLACE_DUE] or '') or now
  redis.call('ZADD', key_timers(), due, iid)
  redis.call('HSET', ti, 'loc', 'timer', 'due', due)
  return 'timer_added'
elseif TASK_LEASED[state] then
  local stream = key_q(queue, tenant, priority)
  local eid = f[TI_PLACE_LEASE_ENTRY] or ''
  local pending = eid ~= '' and names_me(stream, eid) and delivered(stream, eid)
  if not pending then
    if deadline > now then return 'lease_live' end
    -- invisible to the reaper (nothing pending names it): end it as reap would
    redis.call('HINCRBY', key_counters(), 'lease_expired', 1)
    local to = end_attempt(ti, iid, 'lost',
      'lease expired with no stream entry left (ended by redcron doctor)', '1', '', '', now, frac)
    follow_flush(now)
    return 'lease_ended:' .. to
  end
  local did = 'in_place'
  if not redis.call('ZSCORE', key_leases(tenant), iid) then
    redis.call('ZADD', key_leases(tenant), deadline, iid)
    did = 'lease_indexed'
  end
  -- the reaper must look at this stream by the lease's deadline (as lease.lua)
  if not redis.call('ZSCORE', key_pending(), stream) then
    redis.call('ZADD', key_pending(), deadline, stream)
    did = 'lease_indexed'
  end
  return did
elseif state == 'dead' then
  local dlq = key_dlq(tenant)
  local eid = string.match(loc, '^dlq:(.+)$')
  if eid and names_me(dlq, eid) then return 'in_place' end
  local n = f[TI_PLACE_ATTEMPT] or '0'
  local outcome = redis.call('HGET', ti, 'a:' .. n .. ':outcome') or 'failed'
  local new = dlq_add(iid, tenant, queue, f[TI_PLACE_NAME], tonumber(n), outcome, f[TI_PLACE_ERROR],
    f[TI_PLACE_ENDED] or now)
  redis.call('HSET', ti, 'loc', 'dlq:' .. new)
  return 'dlq_added'
elseif state == 'held' then
  if not run_of_task(iid) then return 'in_place' end
  local ak, member = key_attention(), ATTENTION.held .. iid
  if redis.call('ZSCORE', ak, member) then return 'in_place' end
  redis.call('ZADD', ak, 0, member)
  redis.call('HSET', ti, 'loc', 'held')
  return 'held_added'
elseif state == 'waiting' then
  local k = redis.call('HMGET', ti, 'ck', 'ckn')
  local name, ck = f[TI_PLACE_NAME], k[1]
  if not (name and ck) then return 'in_place' end
  local qk = key_ckwaiting(tenant, name, ck)
  if redis.call('LPOS', qk, iid) then return 'in_place' end
  redis.call('RPUSH', qk, iid)
  redis.call('HSET', ti, 'loc', 'ckq')
  local free = (tonumber(k[2] or '') or 1) - redis.call('ZCARD', key_ckslots(tenant, name, ck))
  if free > 0 then ck_wake(tenant, name, ck, free, now) end
  return 'ckq_added'
end
return 'in_place'
