--[[ job_pause: pause (take off the schedule) or resume (back on it) a job.
  KEYS[1] shard prefix
  ARGV[1] job_id   ARGV[2] paused (1|0)
  ARGV[3] next nominal fire ms on resume ("" = none)   ARGV[4] next due ms
  Returns: the job's version.  Fires missed while paused are not caught up.
  Resuming also closes the job's circuit breaker and releases its held work, and
  unparks a job the beat parked (job_park.lua); pausing leaves the parked mark.
  Errors: NOTFOUND. ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/breaker.lua

local job_id, paused, next_fire, next_due = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local jk = key_job(job_id)
if redis.call('EXISTS', jk) == 0 then return err('NOTFOUND', 'no job ' .. job_id) end
if paused == '1' then
  redis.call('HSET', jk, 'paused', '1')
  redis.call('ZREM', key_schedule(), job_id)
else
  breaker_close(job_id, server_ms(), 'resumed')
  -- not paused, no failures: absent (their defaults)
  redis.call('HSET', jk, 'next_fire', next_fire)
  redis.call('HDEL', jk, 'paused', 'paused_reason', 'consecutive_failures', 'parked_reason',
    'parked_at')
  redis.call('ZREM', key_attention(), ATTENTION.parked .. job_id)
  if next_fire ~= '' then redis.call('ZADD', key_schedule(), next_due, job_id) end
end
return tonumber(redis.call('HGET', jk, 'version'))
