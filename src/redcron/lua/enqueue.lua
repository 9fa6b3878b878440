--[[ enqueue: create task instances and make them ready (or put them on the timer set).
  KEYS[1] shard prefix (rc:{sN}:)
  KEYS[2] (optional) the batch key of a batch that takes more than one call
          (batch:<token>, see enqueue_check.lua): when it exists as a key an
          earlier call of the batch refused, so this one writes nothing; when
          this call refuses it sets it, so the later ones write nothing either.
          Its reservations (reserved:<tenant>) are not counted against this
          call's rows, and are used up by what it writes.
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] fields per task (F = 13, 15 with resource requests, 16 with dedupe, 18
          with concurrency keys), then F values per task:
          iid, name, kind, args(msgpack), queue, tenant, priority, timeout_ms,
          max_attempts, retry_base_ms, retry_cap_ms, delay_ms, result_ttl_s
          [, cpu (cores, "" = none), mem (bytes, "" = none)
           [, dedupe ("" = none; a unique window or debounce, lib/dedupe.lua)
            [, ck (concurrency key value, "" = none), ckn (its max_concurrent)] ] ]
          (lib/ckeys.lua: a row whose ck is "" has no key)
  Returns: number of instances created; when a row folded into an existing
          task (a unique key's duplicate, a debounce call), {created, row
          index (0-based), existing id, ...} instead: such a row creates
          nothing (a debounce call moves that task's start and replaces its
          args, lib/dedupe.lua).
  One call is atomic.  A batch of more than 256 rows (or spanning shards) is
  several calls: Enqueuer.enqueue first runs enqueue_check.lua for the whole
  batch (every id; max_queued, reserving the room), then these calls, so a
  refused batch writes nothing and an admitted one is not refused half-way.
  A tenant's max_priority clamps the class asked for; its max_queued bounds
  its ready instances (admission control; countdown tasks are not counted
  until they are due).
  Errors: QUOTA when a tenant would exceed max_queued;
          FORBIDDEN for a command or container row of a tenant without the
          grant allow_commands (lib/grant.lua);
          CONFLICT if an id already exists (or comes twice in the batch);
          REJECTED for a malformed row (bad field count, priority not
          high|normal|low, empty queue/tenant, non-numeric or negative
          numbers, max_attempts < 1, a malformed dedupe field, a concurrency key longer than
          CK_MAX_LEN bytes or its cap not an integer >= 1).  Either way nothing is written;
          REJECTED also when KEYS[2] says an earlier call of the batch refused.
  Upholds: one place per instance (the hash records it from creation on). ]]
-- @include lib/clock.lua
-- @include lib/recent.lua
-- @include lib/ring_add.lua
-- @include lib/rings.lua
-- @include lib/admission.lua
-- @include lib/batch.lua
-- @include lib/grant.lua
-- @include lib/ti_fields.lua
-- @include lib/dedupe.lua

local now = now_ms(ARGV[1])
local F = tonumber(ARGV[2])
local batch_key = KEYS[2]

-- Row i (0-based) of ARGV[3..], F values each, as named values in the order
-- of the header; cpu and mem are '' when F is 13, dedupe when F is under 16.
local function row_at(i)
  local b = 3 + i * F
  local cpu, mem, dedupe = '', '', ''
  if F >= 15 then cpu, mem = ARGV[b + 13], ARGV[b + 14] end
  if F >= 16 then dedupe = ARGV[b + 15] end
  return ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5], ARGV[b + 6],
    ARGV[b + 7], ARGV[b + 8], ARGV[b + 9], ARGV[b + 10], ARGV[b + 11], ARGV[b + 12], cpu, mem,
    dedupe
end

-- Row i's dedupe field alone ('' when F is under 16): the plan reads only it
-- for the rows that have none, the common case.
local function dedupe_at(i)
  if F < 16 then return '' end
  return ARGV[3 + i * F + 15]
end

-- [concurrency keys] a row of CK_F fields ends with ck, ckn (its last two,
-- after every other optional field); row i's key value and cap ('', '': none)
local CK_F, CK_MAX_LEN = 18, 200
local function row_ck(i)
  if F ~= CK_F then return '', '' end
  local b = 3 + i * F
  return ARGV[b + F - 2], ARGV[b + F - 1]
end
-- [/concurrency keys]

local function refuse(code, msg)
  return batch_refuse(batch_key, code, msg)
end

local refused = batch_refused(batch_key)
if refused then return refused end

-- checks before writes: a row that fails half-way would leave an instance with no place
if (F ~= 13 and F ~= 15 and F ~= 16 and F ~= CK_F) or (#ARGV - 2) % F ~= 0 then
  return refuse('REJECTED', 'enqueue takes 13 (or 15) fields per task, 16 with dedupe, 18 with'
    .. ' concurrency keys, got ' .. (#ARGV - 2) .. ' values')
end
local count = (#ARGV - 2) / F
local batch = {}
local grants = {}  -- tenant -> granted, read once per call
local PRIORITIES = {high = true, normal = true, low = true}
local function nonneg(v)
  local x = tonumber(v)
  return x ~= nil and x >= 0
end
for i = 0, count - 1 do
  local iid, _, kind, _, queue, tenant, priority, timeout_ms, max_attempts, retry_base_ms,
    retry_cap_ms, delay_ms, result_ttl_s = row_at(i)
  if iid == '' or queue == '' or tenant == '' then
    return refuse('REJECTED', 'task ' .. iid .. ': id, queue and tenant must not be empty')
  end
  if needs_grant(kind) then
    if grants[tenant] == nil then grants[tenant] = granted(tenant) end
    if not grants[tenant] then
      return refuse('FORBIDDEN', grant_message(tenant, 'task ' .. iid .. ' is a ' .. kind))
    end
  end
  if not PRIORITIES[priority] then
    return refuse('REJECTED', 'task ' .. iid .. ': priority ' .. priority .. ' is not high, normal or low')
  end
  local bad = (not nonneg(timeout_ms) and 'timeout_ms')
    or (not nonneg(retry_base_ms) and 'retry_base_ms')
    or (not nonneg(retry_cap_ms) and 'retry_cap_ms')
    or (not nonneg(delay_ms) and 'delay_ms')
    or (not nonneg(result_ttl_s) and 'result_ttl_s')
  if bad then
    return refuse('REJECTED', 'task ' .. iid .. ': ' .. bad .. ' must be a number >= 0')
  end
  if not (tonumber(max_attempts) and tonumber(max_attempts) >= 1) then
    return refuse('REJECTED', 'task ' .. iid .. ': max_attempts must be >= 1')
  end
  -- [concurrency keys]
  local ck, ckn = row_ck(i)
  if ck ~= '' then
    local cap = tonumber(ckn)
    if #ck > CK_MAX_LEN then
      return refuse('REJECTED', 'task ' .. iid .. ': concurrency key longer than '
        .. CK_MAX_LEN .. ' bytes')
    end
    if not (cap and cap >= 1 and cap == math.floor(cap)) then
      return refuse('REJECTED', 'task ' .. iid .. ': max_concurrent must be an integer >= 1')
    end
  end
  -- [/concurrency keys]
  if batch[iid] or redis.call('EXISTS', key_ti(iid)) == 1 then
    return refuse('CONFLICT', 'task id ' .. iid .. ' already exists')
  end
  batch[iid] = true
end
-- unique windows and debounce (lib/dedupe.lua): decide every row before the
-- first write; plans[i] = {d, action, group}, folded = {index, id, ...}
local plans, folded, dedupe_groups = {}, {}, {}
for i = 0, count - 1 do
  local d, bad = dedupe_parse(dedupe_at(i))
  local iid, _, _, _, _, tenant
  if d or bad then iid, _, _, _, _, tenant = row_at(i) end
  if bad then return refuse('REJECTED', 'task ' .. iid .. ': ' .. bad) end
  if d then
    local action, g = dedupe_plan(dedupe_groups, d, tenant, iid, now)
    plans[i] = {d = d, action = action, group = g}
    if action == 'fold' then
      folded[#folded + 1] = i
      folded[#folded + 1] = g.iid
    end
  end
end
local function folds(i) return plans[i] and plans[i].action == 'fold' end
local function debounced(i) return plans[i] and plans[i].d.mode == 'd' end
-- end unique windows and debounce
-- admission: per tenant, what this call adds against max_queued
local adding, limits = {}, {}
for i = 0, count - 1 do
  local _, _, _, _, _, tenant, _, _, _, _, _, delay_ms = row_at(i)
  adding[tenant] = adding[tenant] or 0
  -- max_queued bounds ready work: a countdown task counts once it is due (a
  -- debounced one too), a folded row never
  if tonumber(delay_ms) == 0 and not folds(i) and not debounced(i) then
    adding[tenant] = adding[tenant] + 1
  end
end
-- a call of an admitted batch: what enqueue_check reserved for it is counted
-- by queued_count already, so it is not counted twice (an expired reservation
-- is not counted at all: then this call is checked as any other)
local ours = {}
if batch_key then
  local server_now = server_ms()
  for t, _ in pairs(adding) do
    local v = redis.call('HMGET', key_reserved(t), batch_key, batch_key .. ':exp')
    if v[1] and (tonumber(v[2] or '') or 0) > server_now then ours[t] = tonumber(v[1]) end
  end
end
for t, n in pairs(adding) do
  local max_queued
  max_queued, limits[t] = admission(t)
  local over = over_quota(t, n, max_queued, ours[t])
  if over then return refuse('QUOTA', over) end
end

local woken = {}
local recent = {}
local tenants_seen = {}
local queues_seen = {}
local rings_seen = {}
local timers = key_timers()
local created = 0
for i = 0, count - 1 do
  local iid, name, kind, args, queue, tenant, priority, timeout_ms, max_attempts, retry_base_ms,
    retry_cap_ms, delay_ms, result_ttl_s, cpu, mem = row_at(i)
  -- unique windows and debounce: a folded row creates nothing (Lua 5.1 has no
  -- goto: `break` leaves this one-pass repeat, the loop's `continue`)
  repeat
  local plan = plans[i]
  if plan and plan.action == 'fold' then
    if plan.d.mode == 'd' then dedupe_merge(plan.group, plan.d, tenant, args, now) end
    break
  end
  if plan and plan.d.mode == 'd' then delay_ms = plan.d.window end
  -- end unique windows and debounce
  created = created + 1
  priority = clamp_priority(priority, limits[tenant])
  local delay = tonumber(delay_ms)
  local ti = key_ti(iid)
  local state, loc, due
  if delay > 0 then
    due = now + delay
    redis.call('ZADD', timers, due, iid)
    state, loc = 'scheduled', 'timer'
  else
    local eid = stream_add(key_q(queue, tenant, priority), iid)
    state, loc, due = 'ready', 'q:' .. eid, ''
    local ring = key_ring(queue, priority)
    local rk = ring .. '\0' .. tenant
    if not rings_seen[rk] then
      rings_seen[rk] = true
      -- a tenant already on the ring was registered (tenants/queues sets) before
      if not ring_add(ring, tenant) then
        tenants_seen[tenant] = true
        queues_seen[queue] = true
      end
      note_oldest(queue, priority, tenant, eid)
    end
    gather_wake(woken, queue)
  end
  -- the id is the key's; a field at its default (TI_DEFAULT_*) is not written
  local row = {'name', name, 'kind', kind, 'args', args, 'queue', queue, 'tenant', tenant,
    'priority', priority, 'max_attempts', max_attempts, 'created', now, 'attempt', 0,
    'epoch', 0, 'state', state, 'loc', loc}
  if due ~= '' then push_field(row, 'due', due) end
  push_unless_default(row, 'timeout_ms', timeout_ms, TI_DEFAULT_TIMEOUT_MS)
  push_unless_default(row, 'retry_base_ms', retry_base_ms, TI_DEFAULT_RETRY_BASE_MS)
  push_unless_default(row, 'retry_cap_ms', retry_cap_ms, TI_DEFAULT_RETRY_CAP_MS)
  push_unless_default(row, 'result_ttl_s', result_ttl_s, TI_DEFAULT_RESULT_TTL_S)
  if cpu ~= '' or mem ~= '' then
    push_field(row, 'cpu', cpu)
    push_field(row, 'mem', mem)
  end
  if plan then dedupe_created(row, plan.d, tenant, iid, now, now + delay) end
  -- [concurrency keys] lease.lua takes a slot of it (lib/ckeys.lua)
  local ck, ckn = row_ck(i)
  if ck ~= '' then
    push_field(row, 'ck', ck)
    push_field(row, 'ckn', ckn)
  end
  -- [/concurrency keys]
  redis.call('HSET', ti, unpack(row))
  note_recent(recent, iid, now)
  if not tenants_seen[tenant] then
    tenants_seen[tenant] = true
    redis.call('ZADD', key_tenants(), 0, tenant)
  end
  if not queues_seen[queue] then
    queues_seen[queue] = true
    redis.call('SADD', key_queues(), queue)
  end
  until true  -- end unique windows and debounce
end
wake_gathered(woken)
save_recent(recent)
-- written now: that much of the batch's reservation is used up
for t, r in pairs(ours) do
  local rk = key_reserved(t)
  if r - adding[t] <= 0 then
    redis.call('HDEL', rk, batch_key, batch_key .. ':exp')
  else
    redis.call('HSET', rk, batch_key, r - adding[t], batch_key .. ':exp', server_ms() + 60000)
  end
end
if #folded > 0 then return {created, unpack(folded)} end
return created
