--[[ notify_enqueue: put one delivery in a channel's outbox, unless the channel
  is gone (removed while the event was routed: nothing outlives it).
  KEYS[1] the channel's key prefix (Keys.channel_prefix)
  ARGV[1] delivery id   ARGV[2] body (JSON: message, attempts, created)   ARGV[3] due (ms)
  Returns: 1 written (or there already: an event routed twice is one delivery),
  0 no such channel.
  Upholds: at-least-once delivery (written before the event is acknowledged). ]]

local delivery_id, body, due = ARGV[1], ARGV[2], ARGV[3]
if redis.call('EXISTS', chan_channel()) == 0 then return 0 end
redis.call('HSETNX', chan_outmsg(), delivery_id, body)
redis.call('ZADD', chan_outbox(), 'NX', due, delivery_id)
return 1
