--[[ enqueue: create task instances and make them ready (or put them on the timer set).
  KEYS[1] shard prefix (rc:{sN}:)
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] fields per task (F = 13), then F values per task:
          iid, name, kind, args(msgpack), queue, tenant, prio, timeout_ms,
          max_attempts, retry_base_ms, retry_cap_ms, delay_ms, result_ttl_s
  Returns: number of instances created.
  Errors: CONFLICT if an id already exists (nothing is written).
  Upholds: invariant 4 (the hash records its one place from creation on). ]]
-- @include lib/common.lua

local now = now_ms(ARGV[1])
local F = tonumber(ARGV[2])
local count = (#ARGV - 2) / F

-- checks before writes
for i = 0, count - 1 do
  local iid = ARGV[3 + i * F]
  if redis.call('EXISTS', key_ti(iid)) == 1 then
    return err('CONFLICT', 'task id ' .. iid .. ' already exists')
  end
end

local woken = {}
local tenants_seen = {}
for i = 0, count - 1 do
  local b = 3 + i * F
  local iid, queue, tenant, prio = ARGV[b], ARGV[b + 4], ARGV[b + 5], ARGV[b + 6]
  local delay = tonumber(ARGV[b + 11])
  local ti = key_ti(iid)
  redis.call('HSET', ti, 'id', iid, 'name', ARGV[b + 1], 'kind', ARGV[b + 2], 'args', ARGV[b + 3],
    'queue', queue, 'tenant', tenant, 'prio', prio, 'timeout_ms', ARGV[b + 7],
    'max_attempts', ARGV[b + 8], 'retry_base_ms', ARGV[b + 9], 'retry_cap_ms', ARGV[b + 10],
    'result_ttl_s', ARGV[b + 12], 'created', now, 'attempt', 0, 'epoch', 0, 'budget', 0)
  if delay > 0 then
    redis.call('ZADD', key_timers(), now + delay, iid)
    redis.call('HSET', ti, 'state', 'scheduled', 'loc', 'timer', 'due', now + delay)
  else
    make_ready(ti, iid, queue, tenant, prio)
    woken[queue] = (woken[queue] or 0) + 1
  end
  if not tenants_seen[tenant] then
    tenants_seen[tenant] = true
    redis.call('SADD', key_tenants(), tenant)
  end
end
for queue, n in pairs(woken) do
  redis.call('SADD', key_queues(), queue)
  wake(queue, n)
end
return count
