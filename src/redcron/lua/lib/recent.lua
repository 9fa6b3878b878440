--[[ recent: the shard's index of task instances by creation time, for
  `redcron task list` (newest first, no SCAN).  Bounded: each writing call
  trims it to the newest RECENT_CAP ids; readers drop ids whose hash expired. ]]

local RECENT_CAP = 100000

local function note_recent(iid, now)
  redis.call('ZADD', key_recent(), now, iid)
end

-- once per call, after its notes: O(log N + removed)
local function trim_recent()
  redis.call('ZREMRANGEBYRANK', key_recent(), 0, -(RECENT_CAP + 1))
end
