--[[ doctor_entries: drop ready-stream entries that no instance owns (left by a
  crash or a hand edit), as lease.lua and reap.lua do when they meet one.
  KEYS[1] shard prefix
  KEYS[2] the ready stream (q:<queue>:<tenant>:<class> of this shard)
  ARGV[1..] entry ids
  Returns: {dropped, kept}.  On re-check an entry is kept when an instance owns
  it: a delivered (pending) entry by an instance leased or running with
  lease_entry = the id on this stream (or ready at it: a stray whose hash is
  back, which the reaper makes ready again); an undelivered one by an instance
  ready with loc q:<id> on this stream.  One whose instance hash is missing
  (a stray: lib/take.lua) is kept until the hash has been missing STRAY_MAX_MS
  (a day; the first sighting is recorded in the maintenance hash, field
  stray:<stream>:<id>, now when none was).  Anything else is acknowledged and
  deleted (XACK + XDEL): no lease holds it, so nothing that runs loses it.
  Upholds: one place per instance (only entries no instance points at go). ]]
-- @include lib/clock.lua
-- @include lib/streams.lua

local stream = KEYS[2]
local drop, kept = {}, 0
for i = 1, #ARGV do
  local eid = ARGV[i]
  local e = redis.call('XRANGE', stream, eid, eid)
  local owned = false
  if e[1] and e[1][2][1] == 'i' and redis.call('EXISTS', key_ti(e[1][2][2])) == 0 then
    local stray = MAINT.stray .. stream .. ':' .. eid
    redis.call('HSETNX', key_maintenance(), stray, server_ms())
    local since = tonumber(redis.call('HGET', key_maintenance(), stray))
    owned = server_ms() - since < MAINT.stray_max_ms
    if not owned then redis.call('HDEL', key_maintenance(), stray) end
  elseif e[1] then
    local f = redis.call('HMGET', key_ti(e[1][2][2]), 'state', 'loc', 'lease_entry', 'queue',
      'tenant', 'priority')
    if f[1] and f[4] and f[5] and f[6] and key_q(f[4], f[5], f[6]) == stream then
      local delivered = #redis.call('XPENDING', stream, GROUP, eid, eid, 1) > 0
      if delivered then
        -- leased on it, or a stray whose hash is back (the reaper re-queues it)
        owned = (TASK_LEASED[f[1]] and f[3] == eid) or (f[1] == 'ready' and f[2] == 'q:' .. eid)
      else
        owned = f[1] == 'ready' and f[2] == 'q:' .. eid
      end
    end
  end
  if owned then kept = kept + 1 else drop[#drop + 1] = eid end
end
if #drop > 0 then drop_entries({[stream] = drop}) end
return {#drop, kept}
