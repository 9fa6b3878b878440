--[[ reap: end expired leases (the worker is gone or stuck) and retry or dead-letter them.
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] limit: leases ended per call (<= 500)
  ARGV[3] jitter fraction [0,1) for the retry backoff
  ARGV[4] the deployment's minimum lease TTL (ms)
  Returns: {reaped, next look ms (-1: no stream has pending entries), streams still due,
    strays: entries left pending because their instance hash is missing}
  XAUTOCLAIM is the reaper.  The index pending (ready stream -> when it next
  needs a look) holds exactly the streams with pending entries; each due
  stream is scanned with XAUTOCLAIM ... JUSTID at min-idle = the shortest
  lease TTL granted or renewed on that stream (maintenance reap_ttl:<stream>, by lease and
  heartbeat; the minimum TTL when absent), COUNT <= 100 per call (Redis scans
  at most 10 x COUNT pending entries per call), at most MAX_CLAIMS calls per
  script (bounded work; a pass cut short keeps its cursor in reap_cursor:<stream> and the
  stream stays due).  A lease and each heartbeat set the deadline to now +
  TTL and stamp the entry's delivery time now, so an entry idle less than the
  stream's shortest TTL cannot be expired: a live lease, heartbeated every
  TTL/6, is not a candidate at all (with the minimum TTL as min-idle every
  live lease was claimed and read again every minimum TTL: measured with
  `redcron bench leases`, that was most of the reaper's CPU).  Each
  candidate's own deadline and token decide (workers may use different
  TTLs): expired -> the attempt ends 'lost', or 'timed_out' when it has been
  running (since started, else leased) for at least the task's
  timeout_ms; live -> left alone, its delivery time set so that it turns
  candidate again at its own deadline; an entry whose hash does not point
  back at it, or one deleted while pending (Redis 6.2 reports those), is
  acknowledged and dropped.  An entry whose instance hash is missing (a
  half-finished slot migration: lib/take.lua) is a stray: left pending and
  counted, its first sighting kept in the maintenance hash (stray:<stream>:<id>);
  deleted only once the hash has been missing STRAY_MAX_MS (a day); once the
  hash is back and points at the entry (ready, loc q:<id>), the instance is
  ready again on a new entry.  After a complete pass the stream leaves the
  index (and reap_ttl) when nothing is pending, else it is due again one
  minimum TTL later (a little less: SLACK below); lease.lua lowers the score
  to a new lease's deadline.  So an expired lease is reaped within (minimum
  TTL + the maintenance interval) of its deadline.
  Upholds: every attempt ends once; nothing in flight is lost; leases run on
  the server clock. ]]
-- @include lib/clock.lua
-- @include lib/streams.lua
-- @include lib/rings.lua
-- @include lib/attempts.lua
-- @include lib/followup.lua
-- @include lib/wake.lua

local override = ARGV[1]
local now = now_ms(override)
local limit = tonumber(ARGV[2])
local frac = ARGV[3]
local min_ttl = tonumber(ARGV[4])
local MAX_STREAMS, MAX_CLAIMS, CLAIM_COUNT = 100, 8, 100

-- A stream is looked at again SLACK before one minimum TTL has passed, with a
-- min-idle 2 x SLACK under it.  Without it, every entry this pass touches
-- (XAUTOCLAIM stamps its own clock, a few ms after the `now` the next look is
-- scheduled from) can be a hair short of min-idle at that next look: an expired
-- lease then waits one more minimum TTL (measured with `redcron bench leases`:
-- 3% of a killed worker's leases reaped up to 2 x min TTL late).  Looking early
-- also leaves the bound room for a maintenance pass that starts late.  An early
-- candidate costs a visit, never a reap: its own deadline decides.
local SLACK = math.min(50, math.floor(min_ttl / 10))
local min_look = min_ttl - SLACK

-- XAUTOCLAIM measures idle time on the server clock; with a test's now the
-- threshold moves by the same offset (delivery times follow that now: stamp()).
local offset = 0
if override ~= '' then offset = server_ms() - now end

local PENDING, UPKEEP = key_pending(), key_maintenance()

-- The idle time (on the clock of `now`) past which an entry of `stream` may
-- have expired: its shortest lease TTL, never under the minimum, less the slack.
local function stream_idle(stream)
  local ttl = tonumber(redis.call('HGET', UPKEEP, MAINT.reap_ttl .. stream) or '') or min_ttl
  return math.max(ttl, min_ttl) - 2 * SLACK
end

local n = 0
local claims = 0
local strays = 0

-- End one candidate entry of a stream (`idle`: its min-idle on the clock of
-- now); returns 1 when a lease was reaped.
local function visit(stream, eid, idle)
  local e = redis.call('XRANGE', stream, eid, eid)
  if not e[1] then
    redis.call('XACK', stream, GROUP, eid)  -- deleted while pending: nothing to run
    return 0
  end
  local iid = e[1][2][2]
  local ti = key_ti(iid)
  local f = read_ti_reap(ti)
  if e[1][2][1] == 'i' and not f[TI_REAP_STATE] and redis.call('EXISTS', ti) == 0 then
    local stray = MAINT.stray .. stream .. ':' .. eid
    local since = tonumber(redis.call('HGET', UPKEEP, stray) or '')
    if since and now - since >= MAINT.stray_max_ms then
      drop_entry(stream, eid)  -- missing a day: gone, not moving
      redis.call('HDEL', UPKEEP, stray)
    else
      if not since then redis.call('HSET', UPKEEP, stray, now) end
      touch(stream, {eid}, now)  -- looked at again one stream TTL on (on now's clock)
      strays = strays + 1
    end
    return 0
  end
  if f[TI_REAP_STATE] == 'ready' and redis.call('HGET', ti, 'loc') == 'q:' .. eid
      and key_q(f[TI_REAP_QUEUE], f[TI_REAP_TENANT], f[TI_REAP_PRIORITY]) == stream then
    -- a stray whose hash is back: ready again (a delivered entry is never read
    -- again, so on a new one)
    drop_entry(stream, eid)
    make_ready(ti, iid, f[TI_REAP_QUEUE], f[TI_REAP_TENANT], f[TI_REAP_PRIORITY], now)
    wake(f[TI_REAP_QUEUE], 1)
    redis.call('HDEL', UPKEEP, MAINT.stray .. stream .. ':' .. eid)
    return 0
  end
  -- entry ids are unique per stream only: the lease must be on this stream
  if not (TASK_LEASED[f[TI_REAP_STATE]] and f[TI_REAP_LEASE_ENTRY] == eid
      and key_q(f[TI_REAP_QUEUE], f[TI_REAP_TENANT], f[TI_REAP_PRIORITY]) == stream) then
    drop_entry(stream, eid)  -- left behind: the instance moved on
    return 0
  end
  local deadline = tonumber(f[TI_REAP_DEADLINE] or '0') or 0  -- text written by hand: expired
  if deadline > now then
    -- a live lease (a longer TTL than the stream's shortest): XAUTOCLAIM made
    -- it idle 0; back-date it so that it turns candidate at its own deadline
    -- again, not one stream TTL from now (which could be long past it)
    touch(stream, {eid}, math.min(now, deadline - idle))
    return 0
  end
  redis.call('HINCRBY', key_counters(), 'lease_expired', 1)
  local outcome, why = 'lost', 'lease expired (worker lost or stuck)'
  local timeout = tonumber(f[TI_REAP_TIMEOUT_MS] or '0') or 0
  if timeout > 0 then
    local pre = 'a:' .. f[TI_REAP_ATTEMPT] .. ':'
    -- started, else leased; a lease an older release granted has them as
    -- a:<n>:s and a:<n>:l, or (older still) a:<n>:started and a:<n>:leased
    local s = redis.call('HMGET', ti, 'started', pre .. 's', pre .. 'started', 'leased',
      pre .. 'l', pre .. 'leased')
    local since = tonumber(s[1] or s[2] or s[3] or s[4] or s[5] or s[6] or '')
    if since and now - since >= timeout then
      outcome = 'timed_out'
      why = 'lease expired after the task ran past its timeout of ' .. timeout .. ' ms'
    end
  end
  end_attempt(ti, iid, outcome, why, '1', '', '', now, frac)
  return 1
end

local due = redis.call('ZRANGEBYSCORE', PENDING, '-inf', now, 'LIMIT', 0, MAX_STREAMS)
for _, stream in ipairs(due) do
  if n >= limit or claims >= MAX_CLAIMS then break end
  local cursor = redis.call('HGET', UPKEEP, MAINT.reap_cursor .. stream) or '0-0'
  local idle = stream_idle(stream)
  repeat
    claims = claims + 1
    local r = redis.call('XAUTOCLAIM', stream, GROUP, CONSUMER, math.max(0, idle + offset),
      cursor, 'COUNT', math.min(CLAIM_COUNT, limit - n), 'JUSTID')
    cursor = r[1]
    for _, eid in ipairs(r[2]) do n = n + visit(stream, eid, idle) end
  until cursor == '0-0' or n >= limit or claims >= MAX_CLAIMS
  if cursor ~= '0-0' then
    -- cut short: the next call goes on from here
    redis.call('HSET', UPKEEP, MAINT.reap_cursor .. stream, cursor)
    redis.call('ZADD', PENDING, now, stream)
  else
    redis.call('HDEL', UPKEEP, MAINT.reap_cursor .. stream)
    if redis.call('XLEN', stream) == 0 or redis.call('XPENDING', stream, GROUP)[1] == 0 then
      redis.call('ZREM', PENDING, stream)
      redis.call('HDEL', UPKEEP, MAINT.reap_ttl .. stream)
    else
      redis.call('ZADD', PENDING, now + min_look, stream)
    end
  end
end
follow_flush(now)
local nxt = redis.call('ZRANGE', PENDING, 0, 0, 'WITHSCORES')
return {n, tonumber(nxt[2] or '-1'), redis.call('ZCOUNT', PENDING, '-inf', now), strays}
