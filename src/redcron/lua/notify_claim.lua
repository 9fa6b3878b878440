--[[ notify_claim: take a channel's due deliveries to send, each pushed out by
  the claim so no other notifier sends it meanwhile, and due again if this one
  dies sending it.
  KEYS[1] the channel's key prefix (Keys.channel_prefix)
  ARGV[1] now (ms)   ARGV[2] claim (ms)   ARGV[3] at most this many
  Returns: {delivery id, body, ...} of the claimed deliveries.
  Upholds: at-least-once delivery (a claim only delays a delivery, never removes it). ]]

local now, claim, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local ok, mk = chan_outbox(), chan_outmsg()
local ids = redis.call('ZRANGEBYSCORE', ok, '-inf', now, 'LIMIT', 0, limit)
local out = {}
for _, id in ipairs(ids) do
  local body = redis.call('HGET', mk, id)
  if body then
    redis.call('ZADD', ok, 'XX', now + claim, id)
    out[#out + 1] = id
    out[#out + 1] = body
  else
    redis.call('ZREM', ok, id)  -- its body gone (by hand): nothing to send
  end
end
return out
