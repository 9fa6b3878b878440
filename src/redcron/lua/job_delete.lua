--[[ job_delete: remove a job and its schedule entry; its runs stay in history
  until their retention expires, and running ones finish.
  KEYS[1] shard prefix
  ARGV[1] tenant   ARGV[2] name
  Returns: the deleted job id.  Errors: NOTFOUND. ]]
-- @include lib/err.lua

local tenant, name = ARGV[1], ARGV[2]

local idx = key_jobs(tenant)
local job_id = redis.call('HGET', idx, name)
if not job_id then return err('NOTFOUND', 'no job ' .. name .. ' for tenant ' .. tenant) end
redis.call('HDEL', idx, name)
redis.call('ZREM', key_jobidx(), tenant .. JOBIDX_SEP .. name)
redis.call('ZREM', key_schedule(), job_id)
redis.call('ZREM', key_brkopen(), job_id)
redis.call('ZREM', key_jobparked(), job_id)
redis.call('DEL', key_job(job_id))
return job_id
