--[[ fail: record failed attempts, batched, and move each instance on
  (retry timer, ready at once, DLQ, or cancelled).
  KEYS[1] shard prefix
  ARGV[1] worker_id
  ARGV[2] now_override_ms ("" = server TIME)
  ARGV[3..] one item per failed attempt, a msgpack map (engine/argv.py fail):
            iid, epoch, outcome (failed|timed_out|lost|cancelled), retryable (1|0),
            jitter (fraction [0,1): Redis seeds Lua's random identically per call,
            so the caller rolls the dice); optional (absent = none): error (text),
            delay_ms (absent = backoff), exit_code.  Numbers are text.
  Returns: one {state, retry_in_ms} per item: the new state (0 = lease lost,
  nothing written) and, for a retry, the delay in ms before the next attempt
  may run (0 = ready at once), else -1.
  Errors: REJECTED for an item that is not a msgpack map or lacks iid, epoch,
  outcome, retryable or jitter (nothing written).
  Upholds: a stale lease token writes nothing; one place per instance; each
  attempt ends once. ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/attempts.lua
-- @include lib/followup.lua

local worker = ARGV[1]
local now = now_ms(ARGV[2])
-- checks before writes: every item decodes before the first attempt ends
local items = {}
for i = 3, #ARGV do
  local ok, it = pcall(cmsgpack.unpack, ARGV[i])
  if not ok or type(it) ~= 'table' or type(it.iid) ~= 'string' or type(it.epoch) ~= 'string'
      or type(it.outcome) ~= 'string' or type(it.retryable) ~= 'string'
      or not tonumber(it.jitter) then
    return err('REJECTED', 'fail item ' .. (i - 3) .. ' is not a msgpack map with iid, epoch,'
      .. ' outcome, retryable and jitter')
  end
  items[#items + 1] = it
end
local out = {}
for _, it in ipairs(items) do
  local iid = it.iid
  local ti = key_ti(iid)
  if token_ok(ti, worker, it.epoch) then
    local state, delay = end_attempt(ti, iid, it.outcome, it.error or '', it.retryable,
      it.delay_ms or '', it.exit_code or '', now, it.jitter)
    out[#out + 1] = {state, delay or -1}
  else
    out[#out + 1] = {0, -1}
  end
end
follow_flush(now)
return out
