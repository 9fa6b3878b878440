--[[ channel_add: index a new channel under its owner, unless that would pass
  the deployment's cap or a tenant's: counted and written in one step, so
  concurrent adds cannot all pass one count (30 at once took a tenant to 22).
  The channel's hash is written before (its own slot; ChannelStore.add) and
  deleted again by the caller on a refusal.
  KEYS[1] the channels index (Keys.channels: channel id -> owner)
  ARGV[1] channel id   ARGV[2] owner (a tenant, or ADMIN_OWNER)
  ARGV[3] most channels a deployment holds   ARGV[4] most a tenant holds
  ARGV[5] the admin's owner (no tenant cap)
  Returns: 1 indexed; CONFLICT when a cap is reached (a state of the deployment,
  not of the request: HTTP 409).
  Upholds: MAX_CHANNELS and MAX_TENANT_CHANNELS (store/channels.py). ]]

-- @include lib/err.lua

local channel_id, owner = ARGV[1], ARGV[2]
local max_all, max_tenant = tonumber(ARGV[3]), tonumber(ARGV[4])
local admin = ARGV[5]
local index = KEYS[1]

if redis.call('HLEN', index) >= max_all then
  return err('CONFLICT', 'the deployment holds its most channels (' .. max_all ..
    '): remove one first')
end
if owner ~= admin then
  local held = 0
  for _, o in ipairs(redis.call('HVALS', index)) do
    if o == owner then held = held + 1 end
  end
  if held >= max_tenant then
    return err('CONFLICT', 'the tenant holds its most channels (' .. max_tenant ..
      '): remove one first')
  end
end
redis.call('HSET', index, channel_id, owner)
return 1
