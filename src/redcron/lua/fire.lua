--[[ fire: turn one fire time of a job into a run, and store the next fire time.
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] owner epoch of the calling beat ("" = not a beat)
  ARGV[3] the fire, a msgpack map (engine/argv.py fire_row); a field left out is "":
          job_id
          expected: due score in the schedule ("" = not from the schedule: manual/API)
          version: job version the caller computed with ("" = any)
          fire_ms: nominal fire time, ms (the run id is derived from it; "" = now,
            manual runs)
          next_ms: next nominal fire time, ms ("" = none: the job leaves the schedule)
          next_due: next due score, ms (next nominal + jitter)
          trigger: cron | every | at (on time, by trigger kind) | catchup | manual,
            or skip (advance the schedule and count the missed fires, create
            nothing: catch-up policy none)
          skipped: missed fires skipped by the catch-up policy (counted)
          run_id
          params: JSON text, manual runs
          Numbers are text (fire_ms and next_ms are stored verbatim in the job hash).
  Returns: {status, run_id}: created | skipped (overlap: a 'skipped' run record
  without instances; buffer_one keeps the first fire held back and skips later
  ones) | buffered (buffer_one: the run starts when the active runs end) | exists
  | skipped_all (trigger skip) | rejected (admission: the tenant is over
  max_queued; recorded as a 'rejected' run) | stale (the score moved: someone fired already) |
  version (job changed: recompute) | paused | malformed (the job hash cannot
  make a run: {'malformed', reason}, nothing written; the beat parks the job)
  Errors: STALE (the beat's shard lease was taken over), NOTFOUND, REJECTED (a
  row that is not a msgpack map of text fields; nothing written).
  Upholds: one run per fire time (compare-and-set on owner epoch, schedule
  score and job version; run id from job id + nominal fire time; run and next
  fire time written together); no fire dropped silently (skipped fires are
  counted, refused ones recorded as runs).
  A scheduled fire's lag is a follow-up (lib/followup.lua, row fires). ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/fire.lua
-- @include lib/followup.lua

local now = now_ms(ARGV[1])
local epoch = ARGV[2]
local fires, bad = fire_rows()
if not fires or #fires ~= 1 then
  return err('REJECTED', bad or 'fire takes one fire row, got ' .. (#ARGV - 2))
end
local fire = fires[1]
local job_id = fire.job_id

if not owner_ok(epoch, now) then
  return err('STALE', 'shard lease lost (epoch ' .. epoch .. ' is not the owner)')
end
local res = fire_one(fire, now, nil)
follow_flush(now)
if res[1] == 'notfound' then return err('NOTFOUND', 'no job ' .. job_id) end
return res
