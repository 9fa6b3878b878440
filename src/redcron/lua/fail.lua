--[[ fail: record failed attempts, batched, and move each instance on
  (retry timer, ready at once, DLQ, or cancelled).
  KEYS[1] shard prefix
  ARGV[1] worker_id
  ARGV[2] now_override_ms ("" = server TIME)
  ARGV[3..] groups of 8: iid, epoch, outcome (failed|timed_out|lost|cancelled),
            error text, retryable (1|0), delay_ms ("" = backoff), jitter fraction [0,1)
            (Redis seeds Lua's random identically per call, so the caller rolls the dice),
            exit code ("" = none)
  Returns: one {state, retry_in_ms} per group: the new state (0 = lease lost,
  nothing written) and, for a retry, the delay in ms before the next attempt
  may run (0 = ready at once), else -1.
  Upholds: a stale lease token writes nothing; one place per instance; each
  attempt ends once. ]]
-- @include lib/clock.lua
-- @include lib/attempts.lua
-- @include lib/followup.lua

local worker = ARGV[1]
local now = now_ms(ARGV[2])
local out = {}
for i = 3, #ARGV, 8 do
  local iid, epoch, outcome, errtext = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local retryable, delay_ms, frac, exitcode = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7]
  local ti = key_ti(iid)
  if token_ok(ti, worker, epoch) then
    local state, delay = end_attempt(ti, iid, outcome, errtext, retryable, delay_ms, exitcode,
      now, frac)
    out[#out + 1] = {state, delay or -1}
  else
    out[#out + 1] = {0, -1}
  end
end
follow_flush(now)
return out
