--[[ doctor_breaker: make a job's entry in the open-breaker index (the shard's
  attention ZSET, member breaker:<job id>, scored 0) agree with its breaker:
  present while the breaker is open or in trial, absent when it is closed or
  the job is gone.
  KEYS[1] shard prefix
  ARGV[1] job id
  Returns: added | dropped | in_place (already consistent: nothing written).
  Upholds: nothing of dispatch: the index only lists jobs for the dashboard, and
  no lease or fire decision reads it. ]]

local job_id = ARGV[1]
local bk, member = key_attention(), ATTENTION.breaker .. job_id
local score = redis.call('ZSCORE', bk, member)
local breaker = redis.call('HGET', key_job(job_id), 'breaker')
local open = breaker == 'open' or breaker == 'trial'
if open and not score then
  redis.call('ZADD', bk, 0, member)
  return 'added'
end
if not open and score then
  redis.call('ZREM', bk, member)
  return 'dropped'
end
return 'in_place'
