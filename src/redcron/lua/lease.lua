--[[ lease: hand out up to N ready instances to one worker: strict priority
  classes with aging, weighted deficit round robin over tenants, caps and
  rate limits.
  KEYS[1] shard prefix (rc:{sN}:)
  ARGV[1] worker_id
  ARGV[2] max_tasks (<= 256)
  ARGV[3] lease_ttl_ms
  ARGV[4] now_override_ms ("" = server TIME)
  ARGV[5] tenant filter: comma-separated tenant names, "" = every tenant
  ARGV[6] quantum: tasks credited per visit per unit of weight ("" = 1)
  ARGV[7] aging threshold ms: ready work waiting this long is served one class
          higher per threshold waited ("" = 60000, 0 = no aging)
  ARGV[8] the worker's free capacity "cpu,mem" (cores, bytes; "" = no limits):
          a task asking for more than is left is not leased to this worker (it
          waits at the head of its tenant's stream for one it fits)
  ARGV[9..] queues the worker serves
  Returns: { {iid, epoch, attempt, name, kind, args, timeout_ms, tenant, cpu, mem, queue,
  last_attempt}, ... } (numbers as integers, cpu as text); last_attempt is the
  number of the last attempt allowed: max_attempts plus the attempts that do
  not count (handed back, or before a DLQ replay)
  Classes are served strictly high > normal > low (aged work first within a
  class).  Within a (queue, class) the tenants with ready work sit in a ring;
  a visit credits quantum x weight to the tenant's deficit and serves while it
  covers a task; a visit cut short by N stays at the head and goes on at the
  next call without a new credit.  A tenant at its cap (valid leases, the size
  of tleases:<t>) or out of rate tokens leaves the ring (parked:<t>) and comes
  back when a lease ends or a token is due (a park:<t> timer); while parked it
  is off the aging index (oldest:<queue>:<class>) as well.  Visits touch
  only tenants with ready work: the cost never grows with idle tenants.
  A run's task whose job has an open circuit breaker is held aside (state
  held, in held:<job>) instead; after the cool-down one becomes the trial.
  Entries are read with XREADGROUP under the one consumer name (after a
  peek with XRANGE when only aged entries, or only what fits, may be taken):
  a leased entry stays pending in the group, and its stream joins the
  reaper's index (pending, scored by the earliest deadline it may need).
  An entry that is held aside, or whose hash does not point back at it (left
  by a crash), is acknowledged and deleted, never run; one whose hash no lease
  can use (edited by hand: lib/malformed.lua) as well, its instance put on the
  timers for promote to dead-letter; so is a command or container task of a
  tenant whose grant allow_commands was revoked after it was queued (never
  handed to a worker: lib/grant.lua).  A stream without the consumer group
  (a hand-written XADD) gets it, from 0, on its first read.
  Upholds: a stale lease token writes nothing (epoch += 1 per assignment); one
  place per instance; fair shares under contention; leases on the server
  clock. ]]
-- @include lib/clock.lua
-- @include lib/streams.lua
-- @include lib/rings.lua
-- @include lib/breaker.lua
-- @include lib/malformed.lua
-- @include lib/grant.lua

local worker = ARGV[1]
local want = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local override = ARGV[4]
local now = now_ms(override)
local tenant_filter = ARGV[5]
local quantum = tonumber(ARGV[6] ~= '' and ARGV[6] or '1') or 1
local aging = tonumber(ARGV[7] ~= '' and ARGV[7] or '60000') or 60000
local deadline = now + ttl
local out = {}
local PENDING = key_pending()
local classes = {'high', 'normal', 'low'}
local dispatched = {}
local tenant_cache = {}
local capacity = ARGV[8] or ''
local FIRST_QUEUE = 9  -- ARGV[9..]: the queues served
local cap_cpu, cap_mem = string.match(capacity, '^([%d.]*),([%d.]*)$')
cap_cpu, cap_mem = tonumber(cap_cpu or ''), tonumber(cap_mem or '')

-- A tenant's limits, read once per call.
local function limits(tenant)
  local t = tenant_cache[tenant]
  if t then return t end
  local f = redis.call('HMGET', key_tenant(tenant), 'weight', 'max_in_flight', 'rate', 'burst',
    'tokens', 'tokens_ts', 'allow_commands')
  t = {weight = tonumber(f[1] or '') or 1, cap = tonumber(f[2] or '') or 0,
       rate = tonumber(f[3] or '') or 0, burst = tonumber(f[4] or '') or 0,
       tokens = tonumber(f[5] or ''), ts = tonumber(f[6] or ''), commands = f[7] == '1'}
  if t.rate > 0 then
    if t.burst <= 0 then t.burst = math.max(1, math.ceil(t.rate)) end
    if t.tokens == nil or t.ts == nil then t.tokens, t.ts = t.burst, now end
    -- refill the bucket on server time
    t.tokens = math.min(t.burst, t.tokens + (now - t.ts) * t.rate / 1000)
    t.ts = now
  end
  tenant_cache[tenant] = t
  return t
end

-- How many more this tenant may start now (cap and rate), parking it when 0.
local function room(tenant, queue, priority, ring)
  local t = limits(tenant)
  local n = want - #out
  if t.cap > 0 then
    local free = t.cap - redis.call('ZCARD', key_tleases(tenant))
    if free < n then n = free end
  end
  local rate_short = false
  if t.rate > 0 and t.tokens < n then
    n = math.floor(t.tokens)
    rate_short = n <= 0
  end
  if n <= 0 then
    redis.call('ZREM', ring, tenant)
    -- off the aging index too, or its old work would hide others' (see serve_aged)
    redis.call('ZREM', key_oldest(queue, priority), tenant)
    redis.call('SADD', key_parked(tenant), queue .. '|' .. priority)
    redis.call('HDEL', key_tenant(tenant), 'v:' .. queue .. ':' .. priority)
    if rate_short then
      local wait = math.ceil((1 - t.tokens) * 1000 / t.rate)
      redis.call('ZADD', key_timers(), now + math.max(1, wait), 'park:' .. tenant)
    end
    return 0
  end
  return n
end

-- The circuit breaker's word on one run instance: 'lease' or 'hold'.  After
-- the cool-down the first instance asked about becomes the single trial.
local breakers = {}
local function breaker_gate(run_id, iid)
  local job_id = job_of_run(run_id)
  if not job_id then return 'lease' end
  local b = breakers[job_id]
  if not b then
    local j = redis.call('HMGET', key_job(job_id), 'breaker', 'breaker_until', 'breaker_trial')
    b = {state = j[1] or '', till = tonumber(j[2] or '') or 0, trial = j[3] or ''}
    breakers[job_id] = b
  end
  if b.state == '' then return 'lease' end
  if b.state == 'open' and now >= b.till then
    redis.call('HSET', key_job(job_id), 'breaker', 'trial', 'breaker_trial', iid)
    breaker_event('breaker_trial', job_id, now, iid)
    b.state, b.trial = 'trial', iid
    return 'lease'
  end
  if b.state == 'trial' and b.trial == iid then return 'lease' end
  if b.state == 'trial' and not b.checked then
    -- a trial that can never report (its hash gone...) would hold the job forever
    b.checked = true
    if breaker_trial_lost(b.trial) then
      redis.call('HSET', key_job(job_id), 'breaker_trial', iid)
      breaker_event('breaker_trial', job_id, now, iid .. ' (trial ' .. b.trial .. ' lost)')
      b.trial = iid
      return 'lease'
    end
  end
  return 'hold'
end

-- How many of the next ready entries (at most n) to take: only entries up to
-- max_id when given (aged work), and only while they fit this worker's free
-- capacity (one that does not fit waits at the head for a worker it fits).
-- Returns the count and the group's last-delivered id.
local function fitting(stream, n, max_id)
  local after = last_delivered(stream)
  local peek = redis.call('XRANGE', stream, '(' .. after, max_id or '+', 'COUNT', n)
  if not (cap_cpu or cap_mem) then return #peek, after end
  local cpu_left, mem_left = cap_cpu, cap_mem
  local k = 0
  for _, e in ipairs(peek) do
    local ti = key_ti(e[2][2])
    local f = redis.call('HMGET', ti, 'state', 'loc', 'cpu', 'mem', 'queue', 'tenant', 'priority')
    if f[1] == 'ready' and f[2] == 'q:' .. e[1] and key_q(f[5], f[6], f[7]) == stream then
      local cpu, mem = tonumber(f[3] or '') or 0, tonumber(f[4] or '') or 0
      if (cpu_left and cpu > cpu_left) or (mem_left and mem > mem_left) then break end
      if cpu_left then cpu_left = cpu_left - cpu end
      if mem_left then mem_left = mem_left - mem end
    end
    k = k + 1
  end
  return k, after
end

-- Lease up to n ready entries of a stream (only entries up to max_id, when
-- given: aged work), read through the consumer group: a leased entry stays
-- pending in the group until its lease ends.  Returns the number leased and
-- whether ready entries are left; keeps the aging index on the first one.
local function take(queue, tenant, priority, stream, n, max_id)
  local k, after = n, nil
  if max_id or cap_cpu or cap_mem then k, after = fitting(stream, n, max_id) end
  local entries = {}
  if k > 0 then
    local res = read_group(stream, k)
    if res then entries = res[1][2] end
  end
  local leased, ids, held = 0, {}, {}
  for _, e in ipairs(entries) do
    local eid = e[1]
    local iid = e[2][2]
    local ti = key_ti(iid)
    after = eid
    local f = redis.call('HMGET', ti, 'state', 'loc', 'attempt', 'name', 'kind', 'args',
      'timeout_ms', 'epoch', 'run', 'cpu', 'mem', 'queue', 'tenant', 'priority', 'max_attempts',
      'budget')
    -- entry ids are unique per stream only: the hash must name this stream too
    local ok = f[1] == 'ready' and f[2] == 'q:' .. eid
      and f[12] == queue and f[13] == tenant and f[14] == priority
    local why = ok and malformed(f[8], f[3], f[7], f[4], f[5], f[6])
    if why then
      -- edited by hand: no lease can be trusted (or used) on it.  Promote
      -- dead-letters it: this script does not carry the run library that
      -- takes (its closures would cost every lease call ~12 us).
      drop_entry(stream, eid)
      quarantine(ti, iid, why, now)
      ok, eid = false, nil
    end
    if ok and needs_grant(f[5]) and not limits(tenant).commands then
      -- queued while granted, revoked since: never run; promote dead-letters it
      drop_entry(stream, eid)
      quarantine(ti, iid, grant_message(tenant, 'task ' .. iid .. ' is a ' .. f[5]), now, 'grant')
      ok, eid = false, nil
    end
    if ok and f[9] and f[9] ~= '' and breaker_gate(f[9], iid) == 'hold' then
      -- the job's breaker is open: held aside, not handed out
      redis.call('HSET', ti, 'state', 'held', 'loc', 'held')
      redis.call('RPUSH', key_held(job_of_run(f[9])), iid)
      ok = false
    end
    if ok then
      local epoch, attempt = tonumber(f[8]) + 1, tonumber(f[3]) + 1
      local pre = 'a:' .. attempt .. ':'
      redis.call('HSET', ti, 'state', 'leased', 'loc', 'lease', 'attempt', attempt,
        'epoch', epoch, 'worker', worker, 'deadline', deadline, 'lease_entry', eid,
        pre .. 'worker', worker, pre .. 'leased', now)
      held[#held + 1] = deadline
      held[#held + 1] = iid
      if f[9] and f[9] ~= '' then
        -- the first lease of a run's task starts the run
        local rk = key_run(f[9])
        if redis.call('HGET', rk, 'state') == 'queued' then
          redis.call('HSET', rk, 'state', 'running', 'started', now)
        end
      end
      local cpu, mem = tonumber(f[10] or '') or 0, tonumber(f[11] or '') or 0
      if cap_cpu then cap_cpu = cap_cpu - cpu end
      if cap_mem then cap_mem = cap_mem - mem end
      out[#out + 1] = {iid, epoch, attempt, f[4], f[5], f[6], tonumber(f[7] or '0'), tenant,
        f[10] or '', tonumber(f[11] or '') or 0, queue,
        (tonumber(f[15] or '') or 1) + (tonumber(f[16] or '') or 0)}
      leased = leased + 1
      ids[#ids + 1] = eid
    elseif eid then
      -- held aside, or left by a crash (the hash does not point back): never run
      drop_entry(stream, eid)
    end
  end
  if leased > 0 then
    -- the tenant's valid leases (its cap counts them), one call for the batch
    redis.call('ZADD', key_tleases(tenant), unpack(held))
    -- the reaper looks at this stream once the earliest of its leases may expire
    redis.call('ZADD', PENDING, 'LT', deadline, stream)
    stamp(stream, ids, now, override)
    local t = limits(tenant)
    if t.rate > 0 then t.tokens = t.tokens - leased end
    dispatched[tenant] = (dispatched[tenant] or 0) + leased
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

-- Weighted deficit round robin over one (queue, class) ring.
local function serve_ring(queue, priority)
  local ring = key_ring(queue, priority)
  local size = redis.call('ZCARD', ring)
  -- every visit serves at least one task or removes the tenant from the ring
  local visits = 0
  while #out < want and visits < want + size do
    visits = visits + 1
    local head = redis.call('ZRANGE', ring, 0, 0)
    local tenant = head[1]
    if not tenant then return end
    local th = key_tenant(tenant)
    local dfield, vfield = 'd:' .. queue .. ':' .. priority, 'v:' .. queue .. ':' .. priority
    local stream = key_q(queue, tenant, priority)
    local n = room(tenant, queue, priority, ring)
    if n > 0 and redis.call('ZCARD', ring) == 1 then
      -- alone in the ring: nobody to share with, serve what fits (no rotation)
      local got, more = take(queue, tenant, priority, stream, n)
      if not more then
        redis.call('ZREM', ring, tenant)
        redis.call('HDEL', th, dfield, vfield)
      elseif got == 0 then
        return  -- its head does not fit this worker
      end
    elseif n > 0 then
      local s = redis.call('HMGET', th, dfield, vfield)
      local deficit = tonumber(s[1] or '') or 0
      local weight = limits(tenant).weight
      if s[2] ~= '1' then
        -- a new visit: credit quantum x weight (capped: an idle or skipped
        -- tenant does not bank credit)
        deficit = math.min(deficit + quantum * weight, quantum * weight + 1)
      end
      local k = math.min(n, math.floor(deficit))
      local got, more = 0, nil
      if k > 0 then
        got, more = take(queue, tenant, priority, stream, k)
      else
        more = ready_count(stream) > 0
      end
      deficit = deficit - got
      if not more then
        -- an empty tenant leaves the ring with its deficit reset (take() keeps
        -- the aging index when it ran)
        redis.call('ZREM', ring, tenant)
        redis.call('HDEL', th, dfield, vfield)
        if k <= 0 then redis.call('ZREM', key_oldest(queue, priority), tenant) end
      elseif #out >= want and deficit >= 1 then
        -- cut short by the batch size: stays at the head, goes on next call
        redis.call('HSET', th, dfield, deficit, vfield, '1')
      else
        redis.call('HSET', th, dfield, deficit)
        redis.call('HDEL', th, vfield)
        redis.call('ZREM', ring, tenant)
        ring_add(ring, tenant)
      end
    end
  end
end

-- Work waiting in a lower class for longer than the aging threshold per class
-- step is served at this class, oldest tenants first (caps and rates apply).
-- The index holds only tenants on the ring: one that is not (parked, or put
-- back by a filtered lease) is dropped from it and the next one looked at, so
-- a parked tenant's old work cannot hide everyone else's.  Each visit drops
-- a tenant from the aged set or fills the batch; the bound is a safety net.
local function serve_aged(queue, ci)
  if aging <= 0 then return end
  for lc = ci + 1, #classes do
    local lower_priority = classes[lc]
    local threshold = now - aging * (lc - ci)
    local index = key_oldest(queue, lower_priority)
    local ring = key_ring(queue, lower_priority)
    local visits = 0
    while #out < want and visits < want + 64 do
      local tenants = redis.call('ZRANGEBYSCORE', index, '-inf', threshold,
        'LIMIT', 0, want - #out)
      if #tenants == 0 then break end
      for _, tenant in ipairs(tenants) do
        if #out >= want then return end
        visits = visits + 1
        local stream = key_q(queue, tenant, lower_priority)
        if redis.call('ZSCORE', ring, tenant) then
          local n = room(tenant, queue, lower_priority, ring)
          local more
          if n > 0 then
            more = select(2, take(queue, tenant, lower_priority, stream, n, tostring(threshold)))
          else
            more = ready_count(stream) > 0
          end
          if not more then
            redis.call('ZREM', ring, tenant)
            redis.call('HDEL', key_tenant(tenant), 'd:' .. queue .. ':' .. lower_priority,
              'v:' .. queue .. ':' .. lower_priority)
          end
        else
          redis.call('ZREM', index, tenant)
        end
      end
    end
    if #out >= want then return end
  end
end

local filter = {}
for t in string.gmatch(tenant_filter, '[^,]+') do filter[#filter + 1] = t end

for ci, priority in ipairs(classes) do
  for qi = FIRST_QUEUE, #ARGV do
    if #out >= want then break end
    local queue = ARGV[qi]
    if #filter > 0 then
      -- a filtered worker goes straight to its tenants' streams (no ring walk)
      local ring = key_ring(queue, priority)
      for _, tenant in ipairs(filter) do
        if #out >= want then break end
        local stream = key_q(queue, tenant, priority)
        if ready_count(stream) > 0 then
          local n = room(tenant, queue, priority, ring)
          local more = true
          if n > 0 then more = select(2, take(queue, tenant, priority, stream, n)) end
          if not more then redis.call('ZREM', ring, tenant) end
        end
      end
    else
      serve_aged(queue, ci)
      serve_ring(queue, priority)
    end
  end
end

-- persist token buckets and the share-of-dispatch counters
for tenant, t in pairs(tenant_cache) do
  if t.rate > 0 then
    redis.call('HSET', key_tenant(tenant), 'tokens', t.tokens, 'tokens_ts', t.ts)
  end
end
if next(dispatched) then
  local dk = key_disp(math.floor(now / 60000))
  for tenant, n in pairs(dispatched) do redis.call('HINCRBY', dk, tenant, n) end
  redis.call('EXPIRE', dk, 180)
end
return out
