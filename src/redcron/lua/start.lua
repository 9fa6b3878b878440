--[[ start: mark leased instances as running, since now (field started).
  The worker sends these marks off the hot path (every 50 ms, for attempts
  still running): an attempt that ends sooner goes from leased to its end.
  KEYS[1] shard prefix
  ARGV[1] worker_id
  ARGV[2] now_override_ms ("" = server TIME)
  ARGV[3..] pairs: iid, epoch
  Returns: number marked; a stale token changes nothing.
  Upholds: a stale lease token writes nothing. ]]
-- @include lib/clock.lua
-- @include lib/token.lua

local worker = ARGV[1]
local now = now_ms(ARGV[2])
local n = 0
local JUST_LEASED = {leased = true}  -- not yet started (a running one stays as it is)
for i = 3, #ARGV, 2 do
  local iid, epoch = ARGV[i], ARGV[i + 1]
  local ti = key_ti(iid)
  local f = read_ti_start(ti)
  if token_holds(f, worker, epoch, JUST_LEASED) then
    redis.call('HSET', ti, 'state', 'running', 'started', now)
    n = n + 1
  end
end
return n
