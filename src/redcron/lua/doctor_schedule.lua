--[[ doctor_schedule: make a job's schedule entry agree with the job: a job that
  is gone, paused or has no next fire has none; an active job with a next
  fire has one (at the due time the caller computed from that next fire and
  the job's jitter, as job_put and resume do); a job the beat parked has none
  until it is updated or resumed.
  KEYS[1] shard prefix
  ARGV[1] job id
  ARGV[2] the job's next_fire (nominal ms) the due time was computed from
  ARGV[3] due time (ms) to schedule it at
  Returns: added | dropped | in_place | changed (the job's next_fire is no longer
  ARGV[2]: nothing written, look again).
  Upholds: one run per fire time (a fire still compares the score and version;
  an entry is only added when there is none). ]]

local job_id, expected, due = ARGV[1], ARGV[2], ARGV[3]
local sk = key_schedule()
local score = redis.call('ZSCORE', sk, job_id)
-- version: every job hash has it (no id field since issue 28; an older one may)
local j = redis.call('HMGET', key_job(job_id), 'version', 'paused', 'next_fire', 'parked_at')
if not j[1] or j[2] == '1' or not j[3] or j[3] == '' then
  if score then
    redis.call('ZREM', sk, job_id)
    return 'dropped'
  end
  return 'in_place'
end
if score then return 'in_place' end
-- parked by the beat (job_park.lua): off the schedule on purpose
if j[4] and j[4] ~= '' then return 'in_place' end
if j[3] ~= expected or due == '' then return 'changed' end
redis.call('ZADD', sk, due, job_id)
return 'added'
