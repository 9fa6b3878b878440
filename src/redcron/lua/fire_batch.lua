--[[ fire_batch: many fires of one shard in one call (the beat's burst path).
  KEYS[1] shard prefix
  ARGV: groups of 12 values laid out exactly as fire.lua's ARGV[1..12]; every
        group carries the same owner epoch and now_override.
  Returns: one {status, run_id, now} per group (statuses as fire.lua, plus
  notfound; now: the server time the fire was recorded at, ms).
  Errors: STALE when the epoch is not the shard owner's (nothing written).
  Upholds: one run per fire time and no fire dropped silently, as fire.lua,
  for each group.  The scheduled fires' lags are follow-ups (lib/followup.lua). ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/rings.lua
-- @include lib/fire.lua
-- @include lib/followup.lua

local first = fire_args(0)
local epoch = first.epoch  -- the same in every group, as now_override
local now = now_ms(first.now_override)

if not owner_ok(epoch, now) then
  return err('STALE', 'shard lease lost (epoch ' .. epoch .. ' is not the owner)')
end
local out = {}
local woken = {}
for b = 0, #ARGV - 1, 12 do
  local res = fire_one(fire_args(b), now, woken)
  res[3] = now
  out[#out + 1] = res
end
wake_gathered(woken)
follow_flush(now)
return out
