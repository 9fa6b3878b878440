--[[ job_pause: pause (take off the schedule) or resume (back on it) a job.
  KEYS[1] shard prefix
  ARGV[1] job_id   ARGV[2] paused (1|0)
  ARGV[3] next nominal fire ms on resume ("" = none)   ARGV[4] next due ms
  Returns: the job's version.  Fires missed while paused are not caught up.
  Resuming also closes the job's circuit breaker and releases its held work.
  Errors: NOTFOUND. ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/breaker.lua

local jk = key_job(ARGV[1])
if redis.call('EXISTS', jk) == 0 then return err('NOTFOUND', 'no job ' .. ARGV[1]) end
if ARGV[2] == '1' then
  redis.call('HSET', jk, 'paused', '1')
  redis.call('ZREM', key_schedule(), ARGV[1])
else
  breaker_close(ARGV[1], server_ms(), 'resumed')
  redis.call('HSET', jk, 'paused', '0', 'paused_reason', '', 'consecutive_failures', 0,
    'next_fire', ARGV[3])
  if ARGV[3] ~= '' then redis.call('ZADD', key_schedule(), ARGV[4], ARGV[1]) end
end
return tonumber(redis.call('HGET', jk, 'version'))
