--[[ outcomes: count how attempts and runs end, for /metrics and the dashboard.
  counters (HASH, lifetime), fields attempts:<tenant>|<outcome> -> attempts
  ended that way, runs:<tenant>|<state> -> runs ended in that state, and
  attempts:*|<outcome>, runs:*|<state>: the same summed over tenants, so
  /metrics reads the totals without reading every tenant's fields.
  minute:<minute> (HASH, per minute, expires after ACTIVITY_TTL_S), fields
  attempts:<tenant>|succeeded and attempts:<tenant>|failed (failed, timed_out or
  lost) -> attempts ended in that minute, and attempts:*|succeeded,
  attempts:*|failed: the same summed over tenants.
 ]]

local ACTIVITY = {succeeded = 'succeeded', failed = 'failed', timed_out = 'failed',
  lost = 'failed'}

-- n attempts of `tenant` ended with `outcome` at `now`.  `active` false leaves
-- them out of the per-minute activity (a hand-back at worker shutdown ends an
-- attempt 'lost', but nothing failed).  Two calls, and a third once per
-- (minute, tenant, kind): the first increment of a field sets the key's expiry.
local function count_attempts(tenant, outcome, n, now, active)
  local ck = key_counters()
  redis.call('HINCRBY', ck, COUNTERS.attempts .. tenant .. '|' .. outcome, n)
  redis.call('HINCRBY', ck, COUNTERS.attempts .. '*|' .. outcome, n)
  local kind = ACTIVITY[outcome]
  if not kind or active == false then return end
  local ak = key_minute(math.floor(now / 60000))
  if redis.call('HINCRBY', ak, MINUTE.attempts .. tenant .. '|' .. kind, n) == n then
    redis.call('EXPIRE', ak, ACTIVITY_TTL_S)
  end
  -- every tenant's, summed ('*' is no tenant name): the overview reads two fields
  redis.call('HINCRBY', ak, MINUTE.attempts .. '*|' .. kind, n)
end

-- A run of `tenant` reached the terminal `state` (a run reopened by a retry
-- counts again when it ends again).
local function count_run(tenant, state)
  local ck = key_counters()
  redis.call('HINCRBY', ck, COUNTERS.runs .. (tenant or '') .. '|' .. state, 1)
  redis.call('HINCRBY', ck, COUNTERS.runs .. '*|' .. state, 1)
end
