--[[ streams: the ready streams and their consumer group.  Every
  q:<queue>:<tenant>:<class> stream is read through one consumer group (GROUP)
  under one consumer name (CONSUMER): entries after the group's
  last-delivered id are ready, delivered ones stay pending in the group while
  their lease lives, and whatever ends the lease acknowledges and deletes the
  entry.  Streams are never trimmed (that would drop ready work). ]]

-- Reset the idle time of pending entries (delivery time := now), as a
-- heartbeat does; JUSTID leaves their delivery counts alone.
local function touch(stream, ids, now)
  if #ids == 0 then return end
  local args = {stream, GROUP, CONSUMER, 0, unpack(ids)}  -- ids: at most a batch (256)
  for _, word in ipairs({'TIME', now, 'JUSTID'}) do args[#args + 1] = word end
  redis.call('XCLAIM', unpack(args))
end

--[[ A consumer group measures an entry's idle time on the server clock.  When
  a test passes its own now, the entries a script delivers get that now as
  their delivery time, so idle times follow the test's clock too (reap.lua
  shifts its min-idle by the same offset).  On the server clock (production)
  XREADGROUP has stamped the same now already. ]]
local function stamp(stream, ids, now, override)
  if override ~= nil and override ~= '' then touch(stream, ids, now) end
end

-- Record that a lease of `ttl` ms was granted or renewed on `stream`: the
-- reaper's min-idle for the stream is the shortest such TTL (maintenance field
-- reap_ttl:<stream>), so a
-- live lease, whose entry a heartbeat stamps every TTL/6, is never its candidate.
local function note_ttl(stream, ttl)
  local k, field = key_maintenance(), MAINT.reap_ttl .. stream
  local t = tonumber(redis.call('HGET', k, field) or '')
  if not t or ttl < t then redis.call('HSET', k, field, ttl) end
end

-- Entries whose lease ended (or left behind by a crash), batched per stream:
-- drops[stream] = {eid, ...}, then one XACK and one XDEL per stream.  XDEL
-- recomputes the stream's first id on every call, scanning the deleted head
-- of its node: one call per entry costs about 4x more than a batch.
local function drop_entries(drops)
  for stream, ids in pairs(drops) do
    redis.call('XACK', stream, GROUP, unpack(ids))
    redis.call('XDEL', stream, unpack(ids))
  end
end

local function drop_entry(stream, eid)
  drop_entries({[stream] = {eid}})
end

-- Ready entries: the stream's length less the group's pending count.  A
-- stream made by a hand-written XADD has no group (XPENDING: NOGROUP): nothing
-- of it was delivered, so every entry is ready (read_group creates the group).
local function ready_count(stream)
  local n = redis.call('XLEN', stream)
  if n == 0 then return 0 end
  local p = redis.pcall('XPENDING', stream, GROUP)
  if p.err then return n end
  return n - p[1]
end

-- The group's last-delivered id: ready entries come after it.
local function last_delivered(stream)
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    for i = 1, #g, 2 do
      if g[i] == 'last-delivered-id' then return g[i + 1] end
    end
  end
  return '0-0'
end

-- The first ready entry's id (nil: none), after `after` (default: looked up).
local function first_ready(stream, after)
  if not after then
    if redis.call('XLEN', stream) == 0 then return nil end
    after = last_delivered(stream)
  end
  local e = redis.call('XRANGE', stream, '(' .. after, '+', 'COUNT', 1)
  return e[1] and e[1][1]
end

local function entry_ms(eid)
  return tonumber(string.match(eid, '^(%d+)'))
end
