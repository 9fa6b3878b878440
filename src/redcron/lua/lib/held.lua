--[[ held: the instances a job's open circuit breaker holds aside, members
  held:<instance id> of the shard's attention ZSET (lib/breaker_gate.lua adds
  them).  A job's run ids all start with <job id>@, so its held members are one
  lexical range, read in instance id order (a scheduled run's id holds its
  fire time: oldest first). ]]

-- The attention key and the first `limit` held members of a job.
local function held_of(job_id, limit)
  local ak, p = key_attention(), ATTENTION.held .. make_run_id(job_id, '')
  return ak, redis.call('ZRANGEBYLEX', ak, '[' .. p, '(' .. p .. '\255', 'LIMIT', 0, limit)
end

-- The instance id a held member names.
local function held_iid(member)
  return string.sub(member, #ATTENTION.held + 1)
end
