--[[ follow_cancel: apply follow-ups of kind cancel (lib/followup.lua, written by
  a fire of an overlap cancel_previous job): cancel every task of the runs the
  fire marked cancel_requested, as run_cancel does (ready, timer, held and
  waiting work taken out of its place; a leased attempt ends cancelled with its
  lease, its worker's report refused), so the run ends cancelled.
  KEYS[1] shard prefix
  ARGV[1..] ids of entries of the shard's followups stream, oldest first
  Returns: the number of entries applied (an id gone or of another kind: 0).
  Upholds: each follow-up applied once (read, applied and deleted in one call);
  one place per instance; each attempt ends once. ]]
-- @include lib/cancel_instance.lua
-- @include lib/mapped.lua
-- @include lib/followed.lua
-- @include lib/followup.lua

local applied, last_at = follow_entries('cancel', 1, function(e)
  for _, row in ipairs(e.cancel or {}) do
    local r = redis.call('HMGET', key_run(row[1]), 'state', 'tasks')
    if r[1] and RUN_ACTIVE[r[1]] then
      for _, iid in ipairs(run_iids(row[1], r[2])) do cancel_instance(iid, e.at) end
    end
  end
end)
follow_flush(last_at)
return applied
