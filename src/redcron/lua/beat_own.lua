--[[ beat_own: acquire, renew or release a shard's ownership lease (fencing epoch).
  KEYS[1] shard prefix
  ARGV[1] beat id   ARGV[2] ttl_ms   ARGV[3] mode: acquire | renew | release
  ARGV[4] now_override_ms ("" = server TIME)
  Returns: {owned (1|0), epoch, owner}
  The epoch grows on every change of owner; fire.lua rejects a caller whose
  epoch is not the current owner's, so a beat that lost its lease cannot fire.
  Upholds: one run per fire time (one owner per shard, fenced by the epoch). ]]
-- @include lib/clock.lua

local me, ttl, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local now = now_ms(ARGV[4])
local bk = key_maintenance()  -- its beat_* fields (keys.py MAINT_BEAT_*)
local f = redis.call('HMGET', bk, MAINT.beat_owner, MAINT.beat_epoch, MAINT.beat_expiry)
local owner, epoch, expiry = f[1] or '', tonumber(f[2] or '0'), tonumber(f[3] or '0')
local live = owner ~= '' and expiry > now
if mode == 'release' then
  if owner == me then redis.call('HSET', bk, MAINT.beat_owner, '', MAINT.beat_expiry, 0) end
  return {0, epoch, ''}
end
if owner == me and live then
  redis.call('HSET', bk, MAINT.beat_expiry, now + ttl)
  return {1, epoch, me}
end
if mode == 'renew' or live then return {0, epoch, owner} end
epoch = epoch + 1
redis.call('HSET', bk, MAINT.beat_owner, me, MAINT.beat_epoch, epoch, MAINT.beat_expiry, now + ttl,
  MAINT.beat_since, now)
return {1, epoch, me}
