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
  ARGV[9] metrics: full | basic (basic: no per-minute share-of-dispatch counts)
  ARGV[10] the tasks the worker registered, each between newlines
          ("\na\nb\n"; "" = any task): an entry of another task is not leased
          but moved to its stream's tail, still ready, its attempts untouched
  ARGV[11..] queues the worker serves
  Returns: { {iid, epoch, attempt, name, kind, args, timeout_ms, tenant, cpu, mem, queue,
  last_attempt, error_classes}, ... } (numbers as integers, cpu as text); last_attempt is the
  number of the last attempt allowed: max_attempts plus the attempts that do
  not count (handed back, or before a DLQ replay); error_classes the call's
  retry_on/permanent_on JSON ("" = none); then one {name} per task
  the worker has not registered that the call moved past
  The protocol: classes are served strictly high > normal > low; within a
  class, for each queue served, first the aged work of lower classes
  (lib/aging.lua), then the ring of tenants with ready work by weighted
  deficit round robin (lib/drr.lua).  A filtered worker goes straight to its
  tenants' streams (no ring walk).  Each tenant visited gets what its cap and
  rate leave room for (lib/limits.lua: none parks it, off the ring until a
  lease ends or a token is due); its entries are leased by lib/take.lua: read
  through the consumer group (after a peek when only aged entries, or only
  what fits the worker's capacity, may be taken: lib/capacity.lua), checked
  against their hashes (one place, malformed, grant), moved past when the
  worker has not registered their task (at most SKIP_MAX a call), held aside instead
  when their job's circuit breaker is open (lib/breaker_gate.lua); an instance with
  a concurrency key takes one of its key's N slots, or waits in the key's list
  (state waiting) while the call reads on (lib/ckeys.lua).  Visits touch
  only tenants with ready work: the cost never grows with idle tenants.  At
  the end the token buckets and (metrics full) the share-of-dispatch counters
  are saved.
  A stream without the consumer group (a hand-written XADD) gets it, from 0,
  on its first read.
  Upholds: a stale lease token writes nothing (epoch += 1 per assignment); one
  place per instance; fair shares under contention; at most N leases per
  concurrency key; leases on the server clock. ]]
-- @include lib/clock.lua
-- @include lib/streams.lua
-- @include lib/limits.lua
-- @include lib/take.lua
-- @include lib/drr.lua
-- @include lib/aging.lua

local now = now_ms(ARGV[4])
local metrics = ARGV[9]
local cap_cpu, cap_mem = string.match(ARGV[8] or '', '^([%d.]*),([%d.]*)$')
local L = {  -- this call's state (lib/take.lua)
  worker = ARGV[1],
  want = tonumber(ARGV[2]),
  now = now,
  deadline = now + tonumber(ARGV[3]),
  override = ARGV[4],
  quantum = tonumber(ARGV[6] ~= '' and ARGV[6] or '1') or 1,
  aging = tonumber(ARGV[7] ~= '' and ARGV[7] or '60000') or 60000,
  cpu = tonumber(cap_cpu or ''),
  mem = tonumber(cap_mem or ''),
  out = {},
  tenants = {},
  gates = {},
  dispatched = {},
  tasks = ARGV[10] ~= '' and ARGV[10] or nil,
  skipped = {}, skips = 0,  -- tasks not registered here: names moved past, entries
}
local filter = {}
for t in string.gmatch(ARGV[5], '[^,]+') do filter[#filter + 1] = t end
local FIRST_QUEUE = 11  -- ARGV[11..]: the queues served
local classes = {'high', 'normal', 'low'}
local out, want = L.out, L.want

for ci, priority in ipairs(classes) do
  for qi = FIRST_QUEUE, #ARGV do
    if #out >= want or L.skips >= SKIP_MAX then break end
    local queue = ARGV[qi]
    if #filter > 0 then
      -- a filtered worker goes straight to its tenants' streams (no ring walk)
      local ring = key_ring(queue, priority)
      for _, tenant in ipairs(filter) do
        if #out >= want or L.skips >= SKIP_MAX then break end
        local stream = key_q(queue, tenant, priority)
        if ready_count(stream) > 0 then
          local n = lease_room(L, tenant, queue, priority, ring)
          local more = true
          if n > 0 then more = select(2, take(L, queue, tenant, priority, stream, n)) end
          if not more then redis.call('ZREM', ring, tenant) end
        end
      end
    else
      serve_aged(L, queue, ci, classes)
      serve_ring(L, queue, priority)
    end
  end
end

-- persist token buckets and the share-of-dispatch counters
limits_save(L.tenants)
if metrics ~= 'basic' and next(L.dispatched) then
  local dk = key_minute(math.floor(now / 60000))
  local total = 0
  for tenant, n in pairs(L.dispatched) do
    redis.call('HINCRBY', dk, MINUTE.dispatched .. tenant, n)
    total = total + n
  end
  -- the minute's total ('*' is no tenant name): a page of tenants reads its
  -- shares with one HMGET, not the whole hash
  redis.call('HINCRBY', dk, MINUTE.dispatched .. '*', total)
  redis.call('EXPIRE', dk, ACTIVITY_TTL_S)
end
for name in pairs(L.skipped) do out[#out + 1] = {name} end
return out
