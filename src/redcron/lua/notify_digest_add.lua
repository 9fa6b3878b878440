--[[ notify_digest_add: count one dead letter in a channel's digest, keeping the
  first errors and a bounded count per (tenant, job).
  KEYS[1] the channel's key prefix (Keys.channel_prefix)
  ARGV[1] group field (j:<tenant>|<job>)   ARGV[2] error (JSON)   ARGV[3] now (ms)
  ARGV[4] groups kept one by one   ARGV[5] errors kept   ARGV[6] the group of the rest
  Returns: the digest's count, 0 when the channel is gone.
  Upholds: at-least-once delivery (counted before the event is acknowledged). ]]

local group, errtext, now = ARGV[1], ARGV[2], ARGV[3]
local max_groups, max_errors, other = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
if redis.call('EXISTS', chan_channel()) == 0 then return 0 end
local dk = chan_digest()
local n = redis.call('HINCRBY', dk, 'count', 1)
redis.call('HSETNX', dk, 'first_at', now)
if redis.call('HEXISTS', dk, group) == 0 then
  if tonumber(redis.call('HGET', dk, 'groups') or '0') >= max_groups then
    group = other
  end
  if redis.call('HEXISTS', dk, group) == 0 then redis.call('HINCRBY', dk, 'groups', 1) end
end
redis.call('HINCRBY', dk, group, 1)
if n <= max_errors then redis.call('HSET', dk, 'e' .. n, errtext) end
return n
