--[[ heartbeat: renew every lease one worker holds on this shard, in one call.
  KEYS[1] shard prefix
  ARGV[1] worker_id
  ARGV[2] lease_ttl_ms
  ARGV[3] now_override_ms ("" = server TIME)
  ARGV[4..] pairs: iid, epoch
  Returns: { lost = {iid...}, revoked = {iid...} } as a two-element array.
  Ownership (state, worker, epoch) is verified before an entry is touched; a
  lost lease is left alone.  A renewed lease gets its new deadline (hash and
  leases:<tenant>, where it is added back if it went missing: a valid token
  means a live lease, since whatever ends a lease changes the state in the
  same script) and its stream entry's idle time reset (XCLAIM ... JUSTID,
  one call per stream), so the reaper passes it over.  A token whose attempt
  was cancelled (the instance is 'cancelled' under this worker and epoch: the
  cancel ended the attempt and its lease) is answered revoked, not renewed, so
  the worker kills what it still runs; a leased instance flagged
  cancel_requested (left by a version that waited for the heartbeat) is renewed
  and answered revoked too.
  Upholds: one valid lease per instance (the whole token is checked); leases
  run on the server clock. ]]
-- @include lib/clock.lua
-- @include lib/streams.lua
-- @include lib/token.lua

local worker = ARGV[1]
local ttl = tonumber(ARGV[2])
local now = now_ms(ARGV[3])
local deadline = now + ttl
local lost, revoked = {}, {}
local entries = {}  -- stream -> its renewed entries
local CANCELLED = {cancelled = true}
for i = 4, #ARGV, 2 do
  local iid, epoch = ARGV[i], ARGV[i + 1]
  local ti = key_ti(iid)
  local f = read_ti_heartbeat(ti)
  if token_holds(f, worker, epoch) then
    redis.call('HSET', ti, 'deadline', deadline)
    -- the token was checked: the lease is valid, so it belongs in the cap's set
    -- (ZADD, not XX: a member lost from it comes back instead of undercounting)
    redis.call('ZADD', key_leases(f[TI_HEARTBEAT_TENANT]), deadline, iid)
    local stream = key_q(f[TI_HEARTBEAT_QUEUE], f[TI_HEARTBEAT_TENANT], f[TI_HEARTBEAT_PRIORITY])
    entries[stream] = entries[stream] or {}
    table.insert(entries[stream], f[TI_HEARTBEAT_LEASE_ENTRY])
    if f[TI_HEARTBEAT_CANCEL_REQUESTED] == '1' then revoked[#revoked + 1] = iid end
  elseif token_holds(f, worker, epoch, CANCELLED) then
    revoked[#revoked + 1] = iid
  else
    lost[#lost + 1] = iid
  end
end
local PENDING = key_pending()
for stream, ids in pairs(entries) do
  touch(stream, ids, now)
  -- a shorter TTL than the lease's own moves the deadline earlier: so may the look
  redis.call('ZADD', PENDING, 'LT', deadline, stream)
  note_ttl(stream, ttl)
end
return {lost, revoked}
