--[[ malformed_recheck: promote's second look at an instance lease.lua set aside
  as malformed (lib/malformed.lua): dead-letter it, unless fixed meanwhile. ]]
-- @include lib/malformed.lua

-- Promote's check of a timer marked by quarantine(): the marker goes; returns
-- the error, the name and the attempt (nil if not a number) when the hash is
-- still malformed, nil when it was fixed meanwhile.
local function still_malformed(ti)
  redis.call('HDEL', ti, 'malformed')
  local f = redis.call('HMGET', ti, 'epoch', 'attempt', 'timeout_ms', 'name', 'kind')
  local has_args = redis.call('HEXISTS', ti, 'args') == 1
  local why = malformed(f[1], f[2], f[3], f[4], f[5], has_args or nil)
  if why then return why, f[4], tonumber(f[2] or '') end
  return nil
end
