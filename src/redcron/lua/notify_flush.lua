--[[ notify_flush: turn a channel's dead-letter digest into one delivery, if its
  last one went long enough ago and nothing was added since the caller read it.
  KEYS[1] the channel's key prefix (Keys.channel_prefix)
  ARGV[1] now (ms)   ARGV[2] at least this long (ms) since the last digest
  ARGV[3] the digest's count the caller built the message from
  ARGV[4] delivery id   ARGV[5] body (JSON: message, attempts, created)
  Returns: 1 the delivery is in the outbox and the digest is cleared; 0 not now
  (too soon, the channel gone, or dead letters added since: the next pass).
  Upholds: at most one digest per channel per interval; no dead letter counted
  is lost (the digest is cleared only with its delivery written). ]]

local now, every, seen = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local delivery_id, body = ARGV[4], ARGV[5]
local ck, dk = chan_channel(), chan_digest()
if redis.call('EXISTS', ck) == 0 then return 0 end
if redis.call('HGET', dk, 'count') ~= seen then return 0 end
if now - tonumber(redis.call('HGET', ck, 'last_digest') or '0') < every then return 0 end
redis.call('DEL', dk)
redis.call('HSET', ck, 'last_digest', now)
redis.call('HSET', chan_outmsg(), delivery_id, body)
redis.call('ZADD', chan_outbox(), now, delivery_id)
return 1
