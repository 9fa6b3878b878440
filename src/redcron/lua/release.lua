--[[ release: hand leases back so the instances run again at once (a worker shutting
  down; the HTTP worker protocol when its client went away before it got its leases).
  KEYS[1] shard prefix
  ARGV[1] worker_id
  ARGV[2] now_override_ms ("" = server TIME)
  ARGV[3..] pairs: iid, epoch
  Returns: number handed back.  The attempt ends 'lost' but does not use up
  the retry budget (the task did nothing wrong).
  Upholds: a stale lease token writes nothing; one place per instance; each
  attempt ends once. ]]
-- @include lib/clock.lua
-- @include lib/attempts.lua
-- @include lib/followup.lua

local worker = ARGV[1]
local now = now_ms(ARGV[2])
local n = 0
for i = 3, #ARGV, 2 do
  local iid, epoch = ARGV[i], ARGV[i + 1]
  local ti = key_ti(iid)
  if token_ok(ti, worker, epoch) then
    redis.call('HINCRBY', ti, 'budget', 1)
    end_attempt(ti, iid, 'lost', 'handed back unrun (worker shutdown or client gone)', '1', '0',
      '', now, 0, 'handed_back')
    n = n + 1
  end
end
follow_flush(now)
return n
