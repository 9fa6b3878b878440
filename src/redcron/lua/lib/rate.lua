--[[ rate: a task's rate limit (rate=, rate_key=; docs/operations.md "Rate
  limits"), applied where an instance is handed to its ready stream: by
  promote, so lease.lua never sees one over its rate.  An instance with a rate
  has rate_ms (the rate's unit, ms), rate_n (starts per unit) and rate_group
  (the rate_key argument's value, absent: the task as a whole) in its hash;
  make_ready (lib/rings.lua) sends every other way to ready (enqueue, a retry,
  a DAG task's turn, a woken waiter...) through the timers first.
  The bucket rate:<tenant>:<name>:<group> (ZSET) holds the group's releases of
  the last unit (<iid>@<ms> -> when released) and the member `next`: the
  group's next turn, unit / n after the last one handed out, so waiters are
  spread one per turn instead of all waking at once.  A release needs both its
  turn and room in the window: at most n releases in any unit, however late
  promote runs.  An instance whose turn is later waits on the timers (state
  scheduled or retry_wait, rate_at = its turn); when it comes, only the room
  is checked (a turn is taken once per way to ready). ]]

-- Hand the instance `iid` (hash `ti`) to the ready stream now?  True: yes (its
-- release is recorded); false: it was put back on the timers until its turn.
local function rate_admit(ti, iid, tenant, now)
  local r = redis.call('HMGET', ti, 'rate_ms', 'rate_n', 'rate_group', 'rate_at', 'name')
  local unit, n = tonumber(r[1] or ''), tonumber(r[2] or '')
  if not unit or not n then return true end
  local bk = key_rate(tenant, r[5], r[3] or '')
  redis.call('ZREMRANGEBYSCORE', bk, '-inf', now - unit)
  local nxt = tonumber(redis.call('ZSCORE', bk, 'next') or '')
  local turn, held = now, redis.call('ZCARD', bk) - (nxt and 1 or 0)
  if not r[4] then  -- a new way to ready: take the group's next turn
    turn = math.max(now, math.ceil(nxt or 0))
    nxt = math.max(now, nxt or 0) + unit / n
    redis.call('ZADD', bk, nxt, 'next')
  end
  if turn <= now and held >= n then
    -- no room: the turn comes back when the oldest release leaves the window
    local first = redis.call('ZRANGE', bk, 0, 1, 'WITHSCORES')
    turn = tonumber(first[1] == 'next' and first[4] or first[2]) + unit
  end
  if turn > now then
    redis.call('ZADD', key_timers(), turn, iid)
    redis.call('HINCRBY', key_counters(), 'rate_waits', 1)
  else
    redis.call('ZADD', bk, now, iid .. '@' .. now)
  end
  -- rate_at: its turn; now: make_ready's pass (make_ready drops it)
  redis.call('HSET', ti, 'rate_at', turn, 'due', turn)
  -- kept while a turn is handed out or a release is in the window
  redis.call('PEXPIRE', bk, math.ceil(math.max(turn, nxt or 0) - now + unit) + 1000)
  return turn <= now
end
