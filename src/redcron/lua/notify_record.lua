--[[ notify_record: the outcome of one attempt to send a delivery, with its line
  in the channel's delivery log: retried later (due again at ARGV[2], with its
  new body) or done (delivered, or given up past the retention).
  KEYS[1] the channel's key prefix (Keys.channel_prefix)
  ARGV[1] delivery id   ARGV[2] retry at (ms; "" = done: it leaves the outbox)
  ARGV[3] the new body ("" when done)   ARGV[4..] the log line's field, value pairs
  Returns: 1 recorded, 0 the channel is gone (nothing written: no key outlives it).
  Upholds: at-least-once delivery (a delivery leaves the outbox only with its
  outcome recorded). ]]

local delivery_id, retry_at, body = ARGV[1], ARGV[2], ARGV[3]
if redis.call('EXISTS', chan_channel()) == 0 then return 0 end
if retry_at == '' then
  redis.call('ZREM', chan_outbox(), delivery_id)
  redis.call('HDEL', chan_outmsg(), delivery_id)
else
  redis.call('HSET', chan_outmsg(), delivery_id, body)
  redis.call('ZADD', chan_outbox(), 'XX', retry_at, delivery_id)
end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('XADD', chan_dlog(), 'MAXLEN', '~', DLOG_MAX, '*', unpack(fields))
return 1
