--[[ doctor_reaper: put a ready stream with pending (leased) entries back in the
  reaper's index, due now, so its expired leases are reaped (reap.lua
  checks each lease's own deadline and token, and drops the stream from the
  index when nothing is pending).
  KEYS[1] shard prefix
  KEYS[2] the ready stream
  Returns: 1 = indexed, 0 = already indexed or nothing pending.
  Upholds: nothing in flight is lost (invariant 4). ]]
-- @include lib/clock.lua
-- @include lib/streams.lua

local stream = KEYS[2]
local pk = key_pending()
if redis.call('ZSCORE', pk, stream) then return 0 end
if redis.call('EXISTS', stream) == 0 or redis.call('XPENDING', stream, GROUP)[1] == 0 then
  return 0
end
redis.call('ZADD', pk, server_ms(), stream)
return 1
