--[[ doctor_breaker: make a job's entry in the open-breaker index agree with its
  breaker: present while the breaker is open or in trial (scored by the end
  of its cool-down), absent when it is closed or the job is gone.
  KEYS[1] shard prefix
  ARGV[1] job id
  Returns: added | dropped | in_place (already consistent: nothing written).
  Upholds: nothing of dispatch: the index only lists jobs for the dashboard, and
  no lease or fire decision reads it. ]]

local job_id = ARGV[1]
local bk = key_brkopen()
local score = redis.call('ZSCORE', bk, job_id)
local j = redis.call('HMGET', key_job(job_id), 'breaker', 'breaker_until')
local open = j[1] == 'open' or j[1] == 'trial'
if open and not score then
  redis.call('ZADD', bk, tonumber(j[2] or '') or 0, job_id)
  return 'added'
end
if not open and score then
  redis.call('ZREM', bk, job_id)
  return 'dropped'
end
return 'in_place'
