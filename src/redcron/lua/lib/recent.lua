--[[ recent: the shard's index of one-off task instances by creation time, for
  `redcron task list` (newest first, no SCAN; a run's tasks are listed through
  runidx, one entry per run).  Bounded: each writing call
  trims it to the newest RECENT_CAP ids; readers drop ids whose hash expired. ]]

local RECENT_CAP = 100000

-- Gather a created instance into `notes` (a table the caller keeps per call).
local function note_recent(notes, iid, now)
  notes[#notes + 1] = now
  notes[#notes + 1] = iid
end

-- Once per call, after its notes: one ZADD for them all, then the trim
-- (O(log N + removed)).  An enqueue call holds at most 256 rows, a run a
-- job's tasks: far below Lua's unpack limit.
local function save_recent(notes)
  if #notes == 0 then return end
  redis.call('ZADD', key_recent(), unpack(notes))
  redis.call('ZREMRANGEBYRANK', key_recent(), 0, -(RECENT_CAP + 1))
end
