--[[ take: lease the ready entries of one stream to the worker of a lease call.
  `L` is that call's state (built by lease.lua): worker, want (the batch
  size), now, deadline (now + the lease TTL), override (a test's now, or ''),
  out (the batch so far), cpu / mem (the worker's free capacity, nil: no
  limit), tenants (lib/limits.lua's cache), gates (lib/breaker_gate.lua's) and
  dispatched (tenant -> leased this call, for the share-of-dispatch counters).
  Entries are read with XREADGROUP under the one consumer name: a leased entry
  stays pending in the group until its lease ends, and its stream joins the
  reaper's index.  An entry whose hash does not point back at it (left by a
  crash) or that is held aside is acknowledged and deleted, never run; so is
  one no lease can use (lib/malformed.lua) or of a tenant whose grant was
  revoked (lib/grant.lua), its instance put on the timers for promote.  One
  whose concurrency key is at its cap waits in the key's list (lib/ckeys.lua):
  its entry is dropped and take() reads on, so the rest of n can still be
  leased from the entries behind it.  An entry whose instance hash is missing
  is never deleted for that (a half-finished cluster slot migration looks so:
  the hash moved, the stream not yet): it stays delivered and pending, its
  stream in the reaper's index and its first sighting in the maintenance
  hash (stray:<stream>:<entry id>); reap.lua puts it back to ready once the
  hash is back, and only an entry whose hash has been missing a day
  (STRAY_MAX_MS) is deleted, by reap.lua or the doctor.  An entry of a task
  the worker has not registered (L.tasks) is not leased: its instance stays
  ready with its attempts and budget untouched, under a fresh entry at the
  stream's tail (only its loc changes), and the call reads no further for it;
  the first such move of an instance wakes an idle worker of the queue. ]]
-- @include lib/streams.lua
-- @include lib/capacity.lua
-- @include lib/limits.lua
-- @include lib/breaker_gate.lua
-- @include lib/quarantine.lua
-- @include lib/ck_admit.lua
-- @include lib/wake.lua

-- XREADGROUP of up to k ready entries.  A stream without the group (made by a
-- hand-written XADD, or deleted by hand while its tenant was on a ring) gets
-- it first, from 0 as stream_add makes it, so the entries already in it are
-- delivered too; before, every lease call of the shard failed with NOGROUP.
local function read_group(stream, k)
  local res = redis.pcall('XREADGROUP', 'GROUP', GROUP, CONSUMER, 'COUNT', k,
    'STREAMS', stream, '>')
  if type(res) == 'table' and res.err then
    if string.find(res.err, 'NOGROUP', 1, true) then
      redis.call('XGROUP', 'CREATE', stream, GROUP, '0', 'MKSTREAM')
    end
    -- any other error (WRONGTYPE...) is raised as it was
    res = redis.call('XREADGROUP', 'GROUP', GROUP, CONSUMER, 'COUNT', k, 'STREAMS', stream, '>')
  end
  return res
end

-- entries one take() reads beyond its n while concurrency keys set some aside
local CK_READ_MAX = 64
-- entries of tasks the worker has not registered one lease call moves to their
-- streams' tails (each visit stops once past it: bounded work on every call)
local SKIP_MAX = 64

-- Lease up to n ready entries of a stream (only entries up to max_id, when
-- given: aged work).  Returns the number leased and whether ready entries are
-- left; keeps the aging index on the first one.
local function take(L, queue, tenant, priority, stream, n, max_id)
  local now, worker, deadline = L.now, L.worker, L.deadline
  local out = L.out
  local leased, ids, held, strays = 0, {}, {}, {}
  local after = nil
  -- entries set to wait for a concurrency key's slot (lib/ckeys.lua) lease
  -- nothing: read on for the rest of n, up to CK_READ_MAX entries in all
  local looked, aside = 0, 1
  while aside > 0 and leased < n and looked < n + CK_READ_MAX do
    aside = 0
    local k = n - leased
    if max_id or L.cpu or L.mem then k, after = capacity_fit(stream, k, max_id, L.cpu, L.mem) end
    local entries = {}
    if k > 0 then
      local res = read_group(stream, k)
      if res then entries = res[1][2] end
    end
    looked = looked + #entries
    for _, e in ipairs(entries) do
      local eid = e[1]
      local iid = e[2][2]
      local ti = key_ti(iid)
      after = eid
      local f = read_ti_lease(ti)
      local kind, run = f[TI_LEASE_KIND], run_of_task(iid)
      -- entry ids are unique per stream only: the hash must name this stream too
      local ok = f[TI_LEASE_STATE] == 'ready' and f[TI_LEASE_LOC] == 'q:' .. eid
        and f[TI_LEASE_QUEUE] == queue and f[TI_LEASE_TENANT] == tenant
        and f[TI_LEASE_PRIORITY] == priority
      local matched = ok
      if not ok and e[2][1] == 'i' and not f[TI_LEASE_STATE]
          and redis.call('EXISTS', ti) == 0 then
        -- no hash: a stray, not a mismatch; left pending (see the header)
        redis.call('HSETNX', key_maintenance(), MAINT.stray .. stream .. ':' .. eid, now)
        strays[#strays + 1] = eid
        ok, eid = false, nil
      end
      if ok and not leasable(f[TI_LEASE_EPOCH], f[TI_LEASE_ATTEMPT], f[TI_LEASE_TIMEOUT_MS],
          f[TI_LEASE_NAME], kind, f[TI_LEASE_ARGS]) then
        -- edited by hand: no lease can be trusted (or used) on it.  Promote
        -- dead-letters it, saying why (lib/malformed.lua): this script carries
        -- neither the run library that takes nor the message.
        quarantine(ti, iid, nil, now)
        ok = false
      end
      if ok and kind ~= 'python' and not tenant_limits(L.tenants, tenant, now).commands then
        -- a command or container task (lib/grant.lua needs_grant) queued while
        -- granted, revoked since: never run; promote dead-letters it, saying why
        quarantine(ti, iid, 'not granted', now, 'grant')
        ok = false
      end
      if ok and L.tasks and not string.find(L.tasks, '\n' .. f[TI_LEASE_NAME] .. '\n', 1, true) then
        -- a task this worker has not registered: left ready, no attempt spent,
        -- at the stream's tail (a fresh entry, marked s) for a worker that has
        -- it, woken the first time
        redis.call('HSET', ti, 'loc', 'q:' .. redis.call('XADD', stream, '*', 'i', iid, 's', '1'))
        if e[2][3] ~= 's' then wake(queue, 1) end
        L.skipped[f[TI_LEASE_NAME]], L.skips, ok = true, L.skips + 1, false
      end
      if ok and run and run ~= '' and breaker_gate(L.gates, run, iid, now) == 'hold' then
        -- the job's breaker is open: held aside, not handed out
        breaker_hold(ti, iid, run)
        ok = false
      end
      local ck = f[TI_LEASE_CK]
      if matched and not ok and ck and f[TI_LEASE_NAME] then
        -- a woken waiter set aside otherwise gives its reserved slot back
        ck_give_back(tenant, f[TI_LEASE_NAME], ck, f[TI_LEASE_CKN], iid, now)
      end
      if ok and ck and not ck_admit(ti, iid, tenant, f[TI_LEASE_NAME], ck, f[TI_LEASE_CKN],
          deadline, now) then
        -- its key is at its cap: it waits in the key's list, not in the stream
        ok, aside = false, aside + 1
      end
      if ok then
        local epoch, attempt = tonumber(f[TI_LEASE_EPOCH]) + 1, tonumber(f[TI_LEASE_ATTEMPT]) + 1
        -- the current attempt's holder and lease time (worker, leased; start.lua
        -- adds started): lib/attempts.lua files them under a:<n>: when it ends
        redis.call('HSET', ti, 'state', 'leased', 'loc', 'lease', 'attempt', attempt,
          'epoch', epoch, 'worker', worker, 'deadline', deadline, 'lease_entry', eid,
          'leased', now)
        held[#held + 1] = deadline
        held[#held + 1] = iid
        -- the first lease of a run's task starts the run
        local rk = run and run ~= '' and key_run(run)
        if rk and redis.call('HGET', rk, 'state') == 'queued' then
          redis.call('HSET', rk, 'state', 'running', 'started', now)
        end
        local cpu, mem = tonumber(f[TI_LEASE_CPU] or '') or 0, tonumber(f[TI_LEASE_MEM] or '') or 0
        if L.cpu then L.cpu = L.cpu - cpu end
        if L.mem then L.mem = L.mem - mem end
        out[#out + 1] = {iid, epoch, attempt, f[TI_LEASE_NAME], kind, f[TI_LEASE_ARGS],
          tonumber(f[TI_LEASE_TIMEOUT_MS] or '0'), tenant, f[TI_LEASE_CPU] or '', mem, queue,
          (tonumber(f[TI_LEASE_MAX_ATTEMPTS] or '') or 1) + (tonumber(f[TI_LEASE_BUDGET] or '') or 0),
          f[TI_LEASE_ERROR_CLASSES] or '', f[TI_LEASE_TRACEPARENT] or '', f[TI_LEASE_TRACESTATE] or ''}
        leased = leased + 1
        ids[#ids + 1] = eid
      elseif eid then
        -- held aside, quarantined, waiting for its concurrency key, or left by a
        -- crash (the hash does not point back): the entry goes, never run
        drop_entry(stream, eid)
      end
    end
  end

  if leased > 0 or #strays > 0 then
    -- the reaper looks at this stream once the earliest of its leases may expire
    -- (a stray is looked at as a lease would be)
    redis.call('ZADD', key_pending(), 'LT', deadline, stream)
    note_ttl(stream, deadline - now)
    stamp(stream, strays, now, L.override)
  end
  if leased > 0 then
    -- the tenant's valid leases (its cap counts them), one call for the batch
    redis.call('ZADD', key_leases(tenant), unpack(held))
    stamp(stream, ids, now, L.override)
    local t = tenant_limits(L.tenants, tenant, now)
    if t.rate > 0 then t.tokens = t.tokens - leased end
    L.dispatched[tenant] = (L.dispatched[tenant] or 0) + leased
  end
  -- keep the aging index on the first ready entry (or drop the tenant when none)
  local head = first_ready(stream, after)
  if head then
    redis.call('ZADD', key_oldest(queue, priority), entry_ms(head), tenant)
  else
    redis.call('ZREM', key_oldest(queue, priority), tenant)
  end
  return leased, head ~= nil
end

-- How many more of the batch this tenant may start now (lib/limits.lua); 0:
-- none, and it was parked off this (queue, class).
local function lease_room(L, tenant, queue, priority, ring)
  local t = tenant_limits(L.tenants, tenant, L.now)
  return tenant_room(t, tenant, queue, priority, ring, L.want - #L.out, L.now)
end
