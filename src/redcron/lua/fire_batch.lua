--[[ fire_batch: many fires of one shard in one call (the beat's burst path).
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] owner epoch of the calling beat ("" = not a beat), every fire's
  ARGV[3..] one row per fire, a msgpack map as fire.lua's ARGV[3]
  Returns: one {status, run_id, now} per fire (statuses as fire.lua, plus
  notfound; now: the server time the fire was recorded at, ms).
  Errors: STALE when the epoch is not the shard owner's, REJECTED for a row
  that is not a msgpack map of text fields (either way nothing written).
  Upholds: one run per fire time and no fire dropped silently, as fire.lua,
  for each fire.  The scheduled fires' lags are follow-ups (lib/followup.lua). ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/rings.lua
-- @include lib/fire.lua
-- @include lib/followup.lua

local now = now_ms(ARGV[1])
local epoch = ARGV[2]
local fires, bad = fire_rows()
if not fires then return err('REJECTED', bad) end

if not owner_ok(epoch, now) then
  return err('STALE', 'shard lease lost (epoch ' .. epoch .. ' is not the owner)')
end
local out = {}
local woken = {}
for _, fire in ipairs(fires) do
  local res = fire_one(fire, now, woken)
  res[3] = now
  out[#out + 1] = res
end
wake_gathered(woken)
follow_flush(now)
return out
