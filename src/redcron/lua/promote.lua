--[[ promote: move due timers (retries, countdown tasks) to their ready streams.
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] limit (<= 500)
  Returns: {promoted, next_due_ms or -1}
  An instance with a rate is handed over only at its turn, else put back
  here until then (lib/rate.lua).
  Members park:<tenant> are rate-limited tenants whose next token is due;
  brk:<job> is a job's circuit-breaker cool-down: its first held instance
  becomes the trial (lib/breaker_cooldown.lua); ckwake:<json> is a
  concurrency key whose waiters lease.lua left to be woken into its free slots
  (lib/ck_admit.lua, lib/ck_due.lua).  None counts as promoted.
  An instance lease.lua put here because its hash cannot be leased (edited by
  hand: lib/malformed.lua) is dead-lettered instead, unless fixed meanwhile;
  so is one whose tenant lacks the grant allow_commands (outcome not_granted),
  unless granted again meanwhile (lib/grant.lua).
  Upholds: one place per instance (ZREM the timer, then XADD). ]]
-- @include lib/clock.lua
-- @include lib/rings.lua
-- @include lib/ck_due.lua
-- @include lib/breaker_cooldown.lua
-- @include lib/dead.lua
-- @include lib/grant.lua
-- @include lib/followup.lua
-- @include lib/unpark.lua
-- @include lib/malformed_recheck.lua
-- @include lib/rate.lua

local now = now_ms(ARGV[1])
local limit = tonumber(ARGV[2])

local due = redis.call('ZRANGEBYSCORE', key_timers(), '-inf', now, 'LIMIT', 0, limit)
local n = 0
local woken = {}
for _, iid in ipairs(due) do
  -- off the timers first: a member's handler may put it back (lib/rate.lua)
  redis.call('ZREM', key_timers(), iid)
  local parked_tenant = string.match(iid, '^park:(.*)$')
  if parked_tenant then
    -- a rate-limited tenant's next token is due: back on its rings
    unpark(parked_tenant)
  end
  local cooled_job = string.match(iid, '^brk:(.*)$')
  if cooled_job then breaker_cooldown_due(cooled_job, now) end
  if string.sub(iid, 1, #CKWAKE) == CKWAKE then
    ck_wake_due(string.sub(iid, #CKWAKE + 1), now)
  end
  local ti = key_ti(iid)
  local f = redis.call('HMGET', ti, 'state', 'loc', 'queue', 'tenant', 'priority', 'malformed')
  if (f[1] == 'retry_wait' or f[1] == 'scheduled') and f[2] == 'timer' then
    local why, name, attempt, outcome = nil, nil, nil, 'malformed'
    if f[6] == 'grant' then
      -- put here by lease.lua: the tenant's grant was revoked after it was queued
      redis.call('HDEL', ti, 'malformed')
      if f[4] and not granted(f[4]) then
        local g = redis.call('HMGET', ti, 'kind', 'name', 'attempt')
        why, name, attempt, outcome = grant_message(f[4], 'task ' .. iid .. ' is a '
          .. tostring(g[1])), g[2], tonumber(g[3] or ''), 'not_granted'
      end
    elseif f[6] then
      why, name, attempt = still_malformed(ti)
    end
    if why and f[3] and f[4] then
      -- put here by lease.lua: no lease can use its hash (lib/malformed.lua),
      -- or its tenant lost the grant; lease.lua left saying why to here
      redis.call('HSET', ti, 'error', why)
      dead_letter(ti, iid, f[4], f[3], name, attempt, outcome, why, now)
    elseif rate_admit(ti, iid, f[4], now) then  -- else back on the timers: lib/rate.lua
      make_ready(ti, iid, f[3], f[4], f[5], now)
      gather_wake(woken, f[3])
      n = n + 1
    end
  end
end
wake_gathered(woken)
follow_flush(now)
local nxt = redis.call('ZRANGE', key_timers(), 0, 0, 'WITHSCORES')
return {n, tonumber(nxt[2] or '-1')}
