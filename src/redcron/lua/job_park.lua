--[[ job_park: take a job the beat cannot plan or fire off the schedule, with a reason.
  KEYS[1] shard prefix
  ARGV[1] job_id
  ARGV[2] job version the beat read ("" = the hash had none)
  ARGV[3] due score the beat read on the schedule
  ARGV[4] reason (plain text: why its next fire could not be computed or sent)
  ARGV[5] now_override_ms ("" = server TIME)
  Returns: 1 = parked; 0 = left alone (the job is gone, was changed or moved on
  the schedule since the beat read it: the beat reads it again).  A job key
  that is not a hash is only taken off the schedule (into attention).
  A parked job keeps parked_reason and parked_at in its hash and sits in the
  shard's attention ZSET (parked:<job id>) instead of the schedule, so no beat retries it every tick;
  job_put (any update, even of an identical spec) and job_pause resume clear
  it and put it back on the schedule, job_delete drops it.
  Upholds: one job's failure never stops the others (shared/DESIGN.md 8a);
  compare-and-set on version and score, as fire, so a job fixed meanwhile is
  never parked for its old fault. ]]
-- @include lib/clock.lua

local job_id, version, expected, reason = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = now_ms(ARGV[5])
local jk = key_job(job_id)

-- checks before writes
local kind = redis.call('TYPE', jk).ok
if kind == 'none' then return 0 end
if kind ~= 'hash' then
  -- not a hash at all (a hand-written key): nothing to mark, but off the schedule
  if not redis.call('ZSCORE', key_schedule(), job_id) then return 0 end
  redis.call('ZREM', key_schedule(), job_id)
  redis.call('ZADD', key_attention(), 0, ATTENTION.parked .. job_id)
  return 1
end
if (redis.call('HGET', jk, 'version') or '') ~= version then return 0 end
local score = redis.call('ZSCORE', key_schedule(), job_id)
if not score or tonumber(score) ~= tonumber(expected) then return 0 end

redis.call('HSET', jk, 'parked_reason', reason, 'parked_at', now)
redis.call('ZREM', key_schedule(), job_id)
redis.call('ZADD', key_attention(), 0, ATTENTION.parked .. job_id)
return 1
