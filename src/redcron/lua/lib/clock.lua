--[[ clock: time in ms from the Redis server clock, or a test's explicit now. ]]

-- Scripts that read TIME and then write must replicate effects, not the script
-- (Redis < 5; a no-op where effects replication is the only mode).
if redis.replicate_commands then pcall(redis.replicate_commands) end

local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Scripts run on the server clock; a test may pass its own now (ms).
local function now_ms(override)
  if override ~= nil and override ~= '' then return tonumber(override) end
  return server_ms()
end
