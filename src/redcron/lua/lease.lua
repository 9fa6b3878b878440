--[[ lease: hand out up to N ready instances to one worker, rotating over tenants.
  KEYS[1] shard prefix (rc:{sN}:)
  ARGV[1] worker_id
  ARGV[2] max_tasks (<= 256)
  ARGV[3] lease_ttl_ms
  ARGV[4] now_override_ms ("" = server TIME)
  ARGV[5] tenant filter: comma-separated tenant names, "" = every tenant
  ARGV[6..] queues the worker serves
  Returns: { {iid, epoch, attempt, name, kind, args, timeout_ms, tenant}, ... } (numbers as integers)
  Classes are served strictly high > normal > low; within a (queue, class) the
  tenants with ready work sit in a ring and each visit serves a fair slice.
  A stream entry whose hash does not point back at it (left by a crash) is
  discarded, never run.
  Upholds: invariants 3 (epoch += 1 per assignment), 4 (one place), 8 (server time). ]]
-- @include lib/common.lua

local worker = ARGV[1]
local want = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local now = now_ms(ARGV[4])
local deadline = now + ttl
local out = {}
local LEASES = key_leases()
local classes = {'high', 'normal', 'low'}

-- Serve up to n entries from the head of a stream.  The entries read are
-- exactly the head of the stream, so one XTRIM MINID (exact) removes them all
-- (cheaper than an XDEL each); ready work behind them is never touched.
local function take(queue, tenant, prio, stream, n)
  local entries = redis.call('XRANGE', stream, '-', '+', 'COUNT', n)
  if #entries == 0 then return 0 end
  local tl = key_tleases(tenant)
  for _, e in ipairs(entries) do
    local eid = e[1]
    local iid = e[2][2]
    local ti = key_ti(iid)
    local f = redis.call('HMGET', ti, 'state', 'loc', 'attempt', 'name', 'kind', 'args',
      'timeout_ms', 'epoch', 'run')
    if f[1] == 'ready' and f[2] == 'q:' .. eid then
      local epoch = tonumber(f[8]) + 1
      local attempt = tonumber(f[3]) + 1
      local pre = 'a:' .. attempt .. ':'
      redis.call('HSET', ti, 'state', 'leased', 'loc', 'lease', 'attempt', attempt,
        'epoch', epoch, 'worker', worker, 'deadline', deadline, 'lease_entry', eid,
        pre .. 'worker', worker, pre .. 'leased', now)
      redis.call('ZADD', LEASES, deadline, iid)
      redis.call('ZADD', tl, deadline, iid)
      if f[9] and f[9] ~= '' then
        -- the first lease of a run's task starts the run
        local rk = key_run(f[9])
        if redis.call('HGET', rk, 'state') == 'queued' then
          redis.call('HSET', rk, 'state', 'running', 'started', now)
        end
      end
      out[#out + 1] = {iid, epoch, attempt, f[4], f[5], f[6], tonumber(f[7] or '0'), tenant}
    end
    -- an entry whose hash does not point back at it was left by a crash: dropped
  end
  local last = entries[#entries][1]
  local ms, seq = string.match(last, '^(%d+)-(%d+)$')
  redis.call('XTRIM', stream, 'MINID', ms .. '-' .. (tonumber(seq) + 1))
  return #entries
end

local filter = {}
for t in string.gmatch(ARGV[5], '[^,]+') do filter[#filter + 1] = t end

for _, prio in ipairs(classes) do
  for qi = 6, #ARGV do
    if #out >= want then return out end
    local queue = ARGV[qi]
    local ring = key_ring(queue, prio)
    if #filter > 0 then
      -- a filtered worker goes straight to its tenants' streams (no ring walk)
      for ti_n, tenant in ipairs(filter) do
        if #out >= want then break end
        local stream = key_q(queue, tenant, prio)
        local slice = math.max(1, math.floor((want - #out) / (#filter - ti_n + 1)))
        take(queue, tenant, prio, stream, slice)
        if redis.call('XLEN', stream) == 0 then redis.call('ZREM', ring, tenant) end
      end
    end
    local size = redis.call('ZCARD', ring)
    if #filter > 0 then size = 0 end
    local visits = 0
    while #out < want and visits < size do
      visits = visits + 1
      local head = redis.call('ZRANGE', ring, 0, 0)
      local tenant = head[1]
      if not tenant then break end
      local stream = key_q(queue, tenant, prio)
      -- a fair slice: share what is left over the tenants still to visit
      local slice = math.max(1, math.floor((want - #out) / (size - visits + 1)))
      local got = take(queue, tenant, prio, stream, slice)
      if got < slice or redis.call('XLEN', stream) == 0 then
        redis.call('ZREM', ring, tenant)
      else
        redis.call('ZREM', ring, tenant)
        ring_add(ring, tenant)
      end
    end
  end
end
return out
