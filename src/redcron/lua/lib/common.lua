--[[ common helpers, included by every script (after the generated key_* functions).
  Conventions: every read and check happens before the first write; times are
  ms from the Redis server clock unless a test passes an explicit now. ]]

if redis.replicate_commands then pcall(redis.replicate_commands) end

local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Scripts run on the server clock; a test may pass its own now (ms).
local function now_ms(override)
  if override ~= nil and override ~= '' then return tonumber(override) end
  return server_ms()
end

-- Reset the idle time of pending entries (delivery time := now), as a
-- heartbeat does; JUSTID leaves their delivery counts alone.
local function touch(stream, ids, now)
  if #ids == 0 then return end
  local args = {stream, GROUP, CONSUMER, 0}
  for _, id in ipairs(ids) do args[#args + 1] = id end
  local n = #args
  args[n + 1] = 'TIME'
  args[n + 2] = now
  args[n + 3] = 'JUSTID'
  redis.call('XCLAIM', unpack(args))
end

--[[ A consumer group measures an entry's idle time on the server clock.  When
  a test passes its own now, the entries a script delivers get that now as
  their delivery time, so idle times follow the test's clock too (reap.lua
  shifts its min-idle by the same offset).  On the server clock (production)
  XREADGROUP has stamped the same now already. ]]
local function stamp(stream, ids, now, override)
  if override ~= nil and override ~= '' then touch(stream, ids, now) end
end

local function err(code, msg)
  return redis.error_reply(code .. ' ' .. msg)
end

-- Append a tenant at the tail of a rotation ring (no-op if already there).
-- Returns true when the tenant was added.
local function ring_add(ring, tenant)
  if redis.call('ZSCORE', ring, tenant) then return false end
  local last = redis.call('ZRANGE', ring, -1, -1, 'WITHSCORES')
  local score = 0
  if last[2] then score = tonumber(last[2]) + 1 end
  redis.call('ZADD', ring, score, tenant)
  return true
end

-- Wake up to n idle workers of a queue (bounded list: never grows past 16).
local function wake(queue, n)
  if n < 1 then return end
  if n > 16 then n = 16 end
  local wk = key_wake(queue)
  local tokens = {}
  for i = 1, n do tokens[i] = '1' end
  if redis.call('LPUSH', wk, unpack(tokens)) > 16 then redis.call('LTRIM', wk, 0, 15) end
end

--[[ Ready streams.  Every q:<queue>:<tenant>:<class> stream is read through one
  consumer group (GROUP) under one consumer name (CONSUMER): entries after the
  group's last-delivered id are ready, delivered ones stay pending in the
  group while their lease lives, and whatever ends the lease acknowledges and
  deletes the entry.  Streams are never trimmed (that would drop ready work). ]]

-- Append an instance; the first append creates the stream with its group.
local function stream_add(stream, iid)
  if redis.call('EXISTS', stream) == 0 then
    redis.call('XGROUP', 'CREATE', stream, GROUP, '0', 'MKSTREAM')
  end
  return redis.call('XADD', stream, '*', 'i', iid)
end

-- Entries whose lease ended (or left behind by a crash), batched per stream:
-- drops[stream] = {eid, ...}, then one XACK and one XDEL per stream.  XDEL
-- recomputes the stream's first id on every call, scanning the deleted head
-- of its node: one call per entry costs about 4x more than a batch.
local function drop_entries(drops)
  for stream, ids in pairs(drops) do
    redis.call('XACK', stream, GROUP, unpack(ids))
    redis.call('XDEL', stream, unpack(ids))
  end
end

local function drop_entry(stream, eid)
  drop_entries({[stream] = {eid}})
end

-- Ready entries: the stream's length less the group's pending count.
local function ready_count(stream)
  local n = redis.call('XLEN', stream)
  if n == 0 then return 0 end
  return n - redis.call('XPENDING', stream, GROUP)[1]
end

-- The group's last-delivered id: ready entries come after it.
local function last_delivered(stream)
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    for i = 1, #g, 2 do
      if g[i] == 'last-delivered-id' then return g[i + 1] end
    end
  end
  return '0-0'
end

-- The first ready entry's id (nil: none), after `after` (default: looked up).
local function first_ready(stream, after)
  if not after then
    if redis.call('XLEN', stream) == 0 then return nil end
    after = last_delivered(stream)
  end
  local e = redis.call('XRANGE', stream, '(' .. after, '+', 'COUNT', 1)
  return e[1] and e[1][1]
end

local function entry_ms(eid)
  return tonumber(string.match(eid, '^(%d+)'))
end

-- Record a tenant's oldest ready entry in (queue, class) unless one is recorded
-- already (aging finds old work through this index, without a scan).  The
-- time is that of the first ready entry, not of `eid` (the entry just added):
-- a tenant that rejoins a ring (unparked, or new work while parked) may have
-- older entries queued, and the index drops a tenant while it is parked.
local function note_oldest(queue, prio, tenant, eid)
  local ok = key_oldest(queue, prio)
  if redis.call('ZSCORE', ok, tenant) then return end
  local first = first_ready(key_q(queue, tenant, prio)) or eid
  if first then redis.call('ZADD', ok, entry_ms(first), tenant) end
end

-- Put an instance on its tenant's ready stream and the tenant on the ring.
local function make_ready(ti, iid, queue, tenant, prio)
  local eid = stream_add(key_q(queue, tenant, prio), iid)
  redis.call('HSET', ti, 'state', 'ready', 'loc', 'q:' .. eid, 'due', '')
  ring_add(key_ring(queue, prio), tenant)
  note_oldest(queue, prio, tenant, eid)
  return eid
end

local PRIO_RANK = {high = 1, normal = 2, low = 3}

-- A tenant's admission settings: max_queued (0 = none) and the highest class
-- it may use (requests above it are clamped).
local function admission(tenant)
  local f = redis.call('HMGET', key_tenant(tenant), 'max_queued', 'max_priority')
  return tonumber(f[1] or '') or 0, PRIO_RANK[f[2] or ''] and f[2] or 'high'
end

local function clamp_prio(prio, max_prio)
  if PRIO_RANK[prio] < PRIO_RANK[max_prio] then return max_prio end
  return prio
end

-- Ready instances a tenant has queued on this shard (every queue and class),
-- plus those admitted multi-call enqueue batches still have to write (their
-- reservations, see enqueue_check.lua; one whose client died expires).
local function queued_count(tenant)
  local n = 0
  for _, queue in ipairs(redis.call('SMEMBERS', key_queues())) do
    for prio, _ in pairs(PRIO_RANK) do n = n + ready_count(key_q(queue, tenant, prio)) end
  end
  local rk = key_reserved(tenant)
  local r = redis.call('HGETALL', rk)
  if #r > 0 then
    local now = server_ms()
    local f = {}
    for i = 1, #r, 2 do f[r[i]] = r[i + 1] end
    for batch, exp in pairs(f) do
      local owner = string.match(batch, '^(.*):exp$')
      if owner then
        if tonumber(exp) > now then
          n = n + (tonumber(f[owner] or '0') or 0)
        else
          redis.call('HDEL', rk, owner, batch)
        end
      end
    end
  end
  return n
end

-- Admission: the refusal when `n` more ready instances would take `tenant`
-- past its `max_queued` (from admission(); 0 = no bound), nil when admitted;
-- `own` is what a multi-call batch reserved for itself, which queued_count
-- counts already.
local function over_quota(tenant, n, max_queued, own)
  if max_queued <= 0 or n <= 0 then return nil end
  local queued = queued_count(tenant) - (own or 0)
  if queued + n <= max_queued then return nil end
  return 'tenant ' .. tenant .. ' has ' .. queued .. ' queued; ' .. n
    .. ' more would exceed its max_queued of ' .. max_queued
end

--[[ A batch of more than one enqueue call has a batch key (KEYS[2],
  batch:<token>): the first call that refuses sets it, and every later call
  of the batch then refuses too, so nothing of a refused batch is written. ]]
local function batch_refuse(batch, code, msg)
  if batch then redis.call('SET', batch, code, 'PX', 60000) end
  return err(code, msg)
end

local function batch_refused(batch)
  if batch and redis.call('EXISTS', batch) == 1 then
    return err('REJECTED', 'an earlier call of this batch was refused; nothing written')
  end
end

-- A tenant parked at its cap or rate limit goes back on the rings it left
-- (those where it still has ready work), and into their aging indexes; the
-- next lease re-checks the limits.
local function unpark(tenant)
  local pk = key_parked(tenant)
  local parked = redis.call('SMEMBERS', pk)
  if #parked == 0 then return end
  redis.call('DEL', pk)
  for _, qc in ipairs(parked) do
    local queue, prio = string.match(qc, '^(.*)|(%a+)$')
    if queue and ready_count(key_q(queue, tenant, prio)) > 0 then
      ring_add(key_ring(queue, prio), tenant)
      note_oldest(queue, prio, tenant)
    end
  end
end

-- Wake result() waiters once the instance is terminal.
local function notify_done(ti, iid)
  local w = tonumber(redis.call('HGET', ti, 'waiters') or '0')
  if w > 0 then
    local dk = key_done(iid)
    local tokens = {}
    for i = 1, math.min(w, 64) do tokens[i] = '1' end
    redis.call('LPUSH', dk, unpack(tokens))
    redis.call('EXPIRE', dk, 60)
    redis.call('HSET', ti, 'waiters', '0')
  end
end

-- Called whenever an instance reaches a state its run counts as ended
-- (succeeded, dead, cancelled); lib/runs.lua sets it to the DAG logic.
local on_end = function(ti, iid, state, now) end

local function make_terminal(ti, iid, state, now)
  redis.call('HSET', ti, 'state', state, 'loc', '', 'ended', now, 'deadline', '')
  local ttl = tonumber(redis.call('HGET', ti, 'result_ttl_s') or '0')
  if ttl and ttl > 0 then redis.call('EXPIRE', ti, ttl) end
  notify_done(ti, iid)
  on_end(ti, iid, state, now)
end

-- Does (worker, epoch) still hold a valid lease on this instance?
local function token_ok(ti, worker, epoch)
  local f = redis.call('HMGET', ti, 'state', 'worker', 'epoch')
  return TASK_LEASED[f[1]] and f[2] == worker and f[3] == epoch
end

--[[ End the current attempt and move the instance to its next place:
  succeeded/cancelled -> terminal; retryable with budget left -> timer (or
  ready at once when delay is 0); otherwise -> the tenant's DLQ.
  outcome: succeeded | failed | timed_out | lost | cancelled
  delay_ms: '' = backoff min(base * 2^(n-1), cap) scaled by frac (full jitter)
  counter: the stats field a retry counts under (default 'retries')
  Returns the new state. ]]
-- @include lib/breaker.lua

local function end_attempt(ti, iid, outcome, errtext, retryable, delay_ms, exitcode, now, frac,
    counter)
  local f = redis.call('HMGET', ti, 'attempt', 'tenant', 'max_attempts', 'retry_base_ms',
    'retry_cap_ms', 'budget', 'cancel_requested', 'queue', 'prio', 'name', 'run', 'lease_entry')
  local n = tonumber(f[1] or '0')
  local tenant, queue, prio = f[2], f[8], f[9]
  local pre = 'a:' .. n .. ':'
  redis.call('HSET', ti, pre .. 'outcome', outcome, pre .. 'ended', now)
  if errtext ~= nil and errtext ~= '' then
    redis.call('HSET', ti, pre .. 'error', errtext, 'error', errtext)
  end
  if exitcode ~= nil and exitcode ~= '' then
    redis.call('HSET', ti, pre .. 'exit', exitcode, 'exit_code', exitcode)
  end
  drop_entry(key_q(queue, tenant, prio), f[12])
  redis.call('ZREM', key_tleases(tenant), iid)
  unpark(tenant)
  redis.call('HSET', ti, 'deadline', '', 'lease_entry', '')
  if f[11] and f[11] ~= '' then breaker_attempt_ended(iid, f[11], outcome, counter, now) end
  if outcome == 'succeeded' then
    make_terminal(ti, iid, 'succeeded', now)
    return 'succeeded'
  end
  if outcome == 'cancelled' or f[7] == '1' then
    make_terminal(ti, iid, 'cancelled', now)
    return 'cancelled'
  end
  local used = n - tonumber(f[6] or '0')
  if retryable == '1' and used < tonumber(f[3] or '1') then
    local delay
    if delay_ms ~= nil and delay_ms ~= '' then
      delay = tonumber(delay_ms)
    else
      local ceiling = tonumber(f[4] or '1000') * (2 ^ (used - 1))
      local cap = tonumber(f[5] or '3600000')
      if ceiling > cap then ceiling = cap end
      delay = math.floor(ceiling * tonumber(frac))
    end
    redis.call('HINCRBY', key_stats(), counter or 'retries', 1)
    if delay <= 0 then
      make_ready(ti, iid, queue, tenant, prio)
      wake(queue, 1)
      return 'ready'
    end
    redis.call('ZADD', key_timers(), now + delay, iid)
    redis.call('HSET', ti, 'state', 'retry_wait', 'loc', 'timer', 'due', now + delay)
    return 'retry_wait'
  end
  -- Dead: the DLQ entry is self-contained (error and log tail travel with it).
  local tail = redis.call('XREVRANGE', key_log(iid, n), '+', '-', 'COUNT', 20)
  local lines = {}
  for i = #tail, 1, -1 do
    local e = tail[i][2]
    for j = 1, #e, 2 do if e[j] == 'line' then lines[#lines + 1] = e[j + 1] end end
  end
  local eid = redis.call('XADD', key_dlq(tenant), '*', 'i', iid, 'name', f[10] or '',
    'queue', queue, 'attempts', n, 'outcome', outcome, 'error', errtext or '',
    'tail', table.concat(lines, '\n'), 'at', now)
  redis.call('HSET', ti, 'state', 'dead', 'loc', 'dlq:' .. eid, 'ended', now)
  redis.call('HINCRBY', key_stats(), 'dead', 1)
  notify_done(ti, iid)
  on_end(ti, iid, 'dead', now)
  return 'dead'
end

-- @include lib/runs.lua
