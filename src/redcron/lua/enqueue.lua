--[[ enqueue: create task instances and make them ready (or put them on the timer set).
  KEYS[1] shard prefix (rc:{sN}:)
  KEYS[2] (optional) the batch key of a batch that takes more than one call
          (lock:batch:<token>, see enqueue_check.lua): when it exists as a key an
          earlier call of the batch refused, so this one writes nothing; when
          this call refuses it sets it, so the later ones write nothing either.
          Its reservations (reserved:<tenant>) are not counted against this
          call's rows, and are used up by what it writes.
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2..] one row per task, a msgpack map (engine/argv.py enqueue_row):
          iid, name, kind, args (msgpack bytes), queue, tenant, priority,
          max_attempts; absent = the default (TI_DEFAULT_*, 0 for delay_ms):
          timeout_ms, retry_base_ms, retry_cap_ms, delay_ms, result_ttl_s;
          absent = none: cpu (cores), mem (bytes), dedupe (a unique window or
          debounce, lib/dedupe.lua), ck (concurrency key value, lib/ckeys.lua)
          with ckn (its max_concurrent), error_classes (the call's retry_on /
          permanent_on as JSON, stored verbatim for the lease to hand out:
          model/error_classes.py), traceparent and tracestate (the W3C trace
          context of the span that enqueued it, stored as given:
          redcron/tracing.py); rate_ms, rate_n, rate_key, rate_group: its
          rate limit (a unit in ms, starts per unit >= 1, the argument named and
          its value; model/rate.py): the instance waits on the timers for promote
          to hand it over at its turn (lib/rate.lua).  Numbers are text, as each hash
          stores them verbatim.
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
          REJECTED for a malformed row, naming the field (not a msgpack map, a
          text field missing or not a string, priority not high|normal|low,
          empty iid/queue/tenant, non-numeric or negative numbers, max_attempts
          < 1, a malformed dedupe field, a concurrency key longer than
          CK_MAX_LEN bytes or its cap not an integer >= 1, a rate not as
          above).  Either way nothing is written;
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
local batch_key = KEYS[2]

local function refuse(code, msg)
  return batch_refuse(batch_key, code, msg)
end

local refused = batch_refused(batch_key)
if refused then return refused end

-- checks before writes: a row that fails half-way would leave an instance with no place
local count = #ARGV - 1
local rows = {}  -- rows[i + 1]: row i (0-based, as the reply counts them)
local CK_MAX_LEN = 200  -- [concurrency keys]
local batch = {}
local grants = {}  -- tenant -> granted, read once per call
local PRIORITIES = {high = true, normal = true, low = true}
local function nonneg(v)
  local x = type(v) == 'string' and tonumber(v)
  return x and x >= 0
end
-- a field a row may leave out: absent, or text
local function maybe_text(v) return v == nil or type(v) == 'string' end
-- the first field of row r that is not text (the ones every row has, then the
-- optional ones); nil: none
local function not_text(r)
  return (type(r.iid) ~= 'string' and 'iid') or (type(r.name) ~= 'string' and 'name')
    or (type(r.kind) ~= 'string' and 'kind') or (type(r.args) ~= 'string' and 'args')
    or (type(r.queue) ~= 'string' and 'queue') or (type(r.tenant) ~= 'string' and 'tenant')
    or (type(r.priority) ~= 'string' and 'priority')
    or (type(r.max_attempts) ~= 'string' and 'max_attempts')
    or (not maybe_text(r.timeout_ms) and 'timeout_ms')
    or (not maybe_text(r.retry_base_ms) and 'retry_base_ms')
    or (not maybe_text(r.retry_cap_ms) and 'retry_cap_ms')
    or (not maybe_text(r.delay_ms) and 'delay_ms')
    or (not maybe_text(r.result_ttl_s) and 'result_ttl_s')
    or (not maybe_text(r.cpu) and 'cpu') or (not maybe_text(r.mem) and 'mem')
    or (not maybe_text(r.dedupe) and 'dedupe') or (not maybe_text(r.ck) and 'ck')
    or (not maybe_text(r.ckn) and 'ckn')
    or (not maybe_text(r.error_classes) and 'error_classes')
    or (not maybe_text(r.traceparent) and 'traceparent')
    or (not maybe_text(r.tracestate) and 'tracestate')
    or (not maybe_text(r.rate_ms) and 'rate_ms') or (not maybe_text(r.rate_n) and 'rate_n')
    or (not maybe_text(r.rate_key) and 'rate_key') or (not maybe_text(r.rate_group) and 'rate_group')
end
-- the first number of row r that is not one >= 0 (absent: its default, fine)
local function not_nonneg(r)
  return (r.timeout_ms and not nonneg(r.timeout_ms) and 'timeout_ms')
    or (r.retry_base_ms and not nonneg(r.retry_base_ms) and 'retry_base_ms')
    or (r.retry_cap_ms and not nonneg(r.retry_cap_ms) and 'retry_cap_ms')
    or (r.delay_ms and not nonneg(r.delay_ms) and 'delay_ms')
    or (r.result_ttl_s and not nonneg(r.result_ttl_s) and 'result_ttl_s')
    or (r.rate_ms and not ((tonumber(r.rate_ms) or 0) >= 1 and (tonumber(r.rate_n or '') or 0) >= 1)
      and 'rate_ms and rate_n (both >= 1)')
end
-- what an error calls row i: its id, or its index when it has none
local function task(r, i)
  return 'task ' .. (type(r.iid) == 'string' and r.iid or ('row ' .. i))
end
for i = 0, count - 1 do
  local ok, r = pcall(cmsgpack.unpack, ARGV[i + 2])
  if not ok or type(r) ~= 'table' then
    return refuse('REJECTED', 'task row ' .. i .. ' is not a msgpack map')
  end
  rows[i + 1] = r
  local field = not_text(r)
  if field then
    return refuse('REJECTED', task(r, i) .. ': ' .. field .. ' must be a string')
  end
  local iid, kind, tenant, priority = r.iid, r.kind, r.tenant, r.priority
  if iid == '' or r.queue == '' or tenant == '' then
    return refuse('REJECTED', task(r, i) .. ': id, queue and tenant must not be empty')
  end
  if needs_grant(kind) then
    if grants[tenant] == nil then grants[tenant] = granted(tenant) end
    if not grants[tenant] then
      return refuse('FORBIDDEN', grant_message(tenant, 'task ' .. iid .. ' is a ' .. kind))
    end
  end
  if not PRIORITIES[priority] then
    return refuse('REJECTED', task(r, i) .. ': priority ' .. priority .. ' is not high, normal or low')
  end
  local bad = not_nonneg(r)
  if bad then
    return refuse('REJECTED', task(r, i) .. ': ' .. bad .. ' must be a number >= 0')
  end
  if not (nonneg(r.max_attempts) and tonumber(r.max_attempts) >= 1) then
    return refuse('REJECTED', task(r, i) .. ': max_attempts must be >= 1')
  end
  -- [concurrency keys]
  local ck = r.ck or ''
  if ck ~= '' then
    local cap = tonumber(r.ckn or '')
    if #ck > CK_MAX_LEN then
      return refuse('REJECTED', task(r, i) .. ': concurrency key longer than '
        .. CK_MAX_LEN .. ' bytes')
    end
    if not (cap and cap >= 1 and cap == math.floor(cap)) then
      return refuse('REJECTED', task(r, i) .. ': max_concurrent must be an integer >= 1')
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
  local r = rows[i + 1]
  local d, bad = dedupe_parse(r.dedupe or '')
  if bad then return refuse('REJECTED', 'task ' .. r.iid .. ': ' .. bad) end
  if d then
    local action, g = dedupe_plan(dedupe_groups, d, r.tenant, r.iid, now)
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
  local tenant, delay_ms = rows[i + 1].tenant, rows[i + 1].delay_ms or '0'
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
  local r = rows[i + 1]
  local iid, queue, tenant, priority = r.iid, r.queue, r.tenant, r.priority
  local delay_ms = r.delay_ms or '0'
  -- unique windows and debounce: a folded row creates nothing (Lua 5.1 has no
  -- goto: `break` leaves this one-pass repeat, the loop's `continue`)
  repeat
  local plan = plans[i]
  if plan and plan.action == 'fold' then
    if plan.d.mode == 'd' then dedupe_merge(plan.group, plan.d, tenant, r.args, now) end
    break
  end
  if plan and plan.d.mode == 'd' then delay_ms = plan.d.window end
  -- end unique windows and debounce
  created = created + 1
  priority = clamp_priority(priority, limits[tenant])
  local delay = tonumber(delay_ms)
  local ti = key_ti(iid)
  local state, loc, due
  if delay > 0 or r.rate_ms then  -- a rate: promote hands it over at its turn (lib/rate.lua)
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
  local row = {'name', r.name, 'kind', r.kind, 'args', r.args, 'queue', queue,
    'tenant', tenant, 'priority', priority, 'max_attempts', r.max_attempts, 'created', now,
    'attempt', 0, 'epoch', 0, 'state', state, 'loc', loc}
  if due ~= '' then push_field(row, 'due', due) end
  -- (a row leaves out a field at its default: `or` it back)
  push_unless_default(row, 'timeout_ms', r.timeout_ms or TI_DEFAULT_TIMEOUT_MS,
    TI_DEFAULT_TIMEOUT_MS)
  push_unless_default(row, 'retry_base_ms', r.retry_base_ms or TI_DEFAULT_RETRY_BASE_MS,
    TI_DEFAULT_RETRY_BASE_MS)
  push_unless_default(row, 'retry_cap_ms', r.retry_cap_ms or TI_DEFAULT_RETRY_CAP_MS,
    TI_DEFAULT_RETRY_CAP_MS)
  push_unless_default(row, 'result_ttl_s', r.result_ttl_s or TI_DEFAULT_RESULT_TTL_S,
    TI_DEFAULT_RESULT_TTL_S)
  local cpu, mem = r.cpu or '', r.mem or ''
  if cpu ~= '' or mem ~= '' then
    push_field(row, 'cpu', cpu)
    push_field(row, 'mem', mem)
  end
  if plan then dedupe_created(row, plan.d, tenant, iid, now, now + delay) end
  -- [concurrency keys] lease.lua takes a slot of it (lib/ckeys.lua)
  if (r.ck or '') ~= '' then
    push_field(row, 'ck', r.ck)
    push_field(row, 'ckn', r.ckn)
  end
  -- [/concurrency keys]
  if (r.error_classes or '') ~= '' then push_field(row, 'error_classes', r.error_classes) end
  if (r.traceparent or '') ~= '' then  -- tracing on (redcron/tracing.py)
    push_field(row, 'traceparent', r.traceparent)
    if (r.tracestate or '') ~= '' then push_field(row, 'tracestate', r.tracestate) end
  end
  for _, k in ipairs(r.rate_ms and {'rate_ms', 'rate_n', 'rate_key', 'rate_group'} or {}) do
    if (r[k] or '') ~= '' then push_field(row, k, r[k]) end
  end
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
for t, reserved in pairs(ours) do
  local rk = key_reserved(t)
  if reserved - adding[t] <= 0 then
    redis.call('HDEL', rk, batch_key, batch_key .. ':exp')
  else
    redis.call('HSET', rk, batch_key, reserved - adding[t], batch_key .. ':exp',
      server_ms() + 60000)
  end
end
if #folded > 0 then return {created, unpack(folded)} end
return created
