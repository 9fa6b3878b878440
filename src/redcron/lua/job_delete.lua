--[[ job_delete: remove a job and its schedule entry; its runs stay in history
  until their retention expires, and running ones finish.
  KEYS[1] shard prefix
  ARGV[1] tenant   ARGV[2] name
  Returns: the deleted job id.  Errors: NOTFOUND. ]]
-- @include lib/err.lua

local idx = key_jobs(ARGV[1])
local job_id = redis.call('HGET', idx, ARGV[2])
if not job_id then return err('NOTFOUND', 'no job ' .. ARGV[2] .. ' for tenant ' .. ARGV[1]) end
redis.call('HDEL', idx, ARGV[2])
redis.call('ZREM', key_schedule(), job_id)
redis.call('DEL', key_job(job_id))
return job_id
