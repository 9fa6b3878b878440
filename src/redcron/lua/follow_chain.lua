--[[ follow_chain: apply follow-ups of kind chain (lib/followup.lua, written by
  follow_runs.lua): the runs that start because a run of a job ended.
  KEYS[1] shard prefix
  ARGV[1..] ids of entries of the shard's followups stream, oldest first
  Returns: the number of entries applied (an id gone or of another kind: 0).
  Per row {job id, state}, at the time of the entry (at): a succeeded run
  satisfies the jobs that name its job in depends_on (lib/chain.lua: those
  whose upstreams are all satisfied start a run); then the fire its job held
  back while runs were going (overlap buffer_one) starts, once no run of the
  job is active, unless the job was paused meanwhile (recorded as a skipped
  run).  A run that exists already is never made twice (run ids are derived).
  Upholds: each follow-up applied once (read, applied and deleted in one
  call); one run per fire time. ]]
-- @include lib/run_create.lua
-- @include lib/chain.lua
-- @include lib/followed.lua
-- @include lib/followup.lua

-- buffer_one: the fire held back while runs were going starts now, unless
-- the job was paused meanwhile (a paused job takes no scheduled fires)
local function start_buffered(job_id, at)
  local jk = key_job(job_id)
  local buffered = redis.call('HGET', jk, 'buffered')
  if not buffered or buffered == '' or redis.call('SCARD', key_active(job_id)) > 0 then return end
  redis.call('HSET', jk, 'buffered', '')
  local fire_ms, trig = string.match(buffered, '^(%d+)|(.*)$')
  local rid = make_run_id(job_id, fire_ms)
  if redis.call('EXISTS', key_run(rid)) == 1 then return end
  if redis.call('HGET', jk, 'paused') == '1' then
    record_skipped(job_id, rid, tonumber(fire_ms), trig, at, 'buffered fire: job paused')
  else
    create_run(job_id, rid, tonumber(fire_ms), trig, at, '')
  end
end

local applied, last_at = follow_entries('chain', 1, function(e)
  for _, row in ipairs(e.chain or {}) do
    local job_id, state = row[1], row[2]
    if redis.call('EXISTS', key_job(job_id)) == 1 then
      if state == 'succeeded' then chain_upstream_succeeded(job_id, e.at) end
      start_buffered(job_id, e.at)
    end
  end
end)
follow_flush(last_at)  -- a started run's map over a param (lib/run_create.lua)
return applied
