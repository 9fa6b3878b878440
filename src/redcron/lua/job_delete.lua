--[[ job_delete: remove a job and its schedule entry; its runs stay in history
  until their retention expires, and running ones finish.
  KEYS[1] shard prefix
  ARGV[1] tenant   ARGV[2] name
  A job other jobs name in depends_on is not deleted (CONFLICT naming them:
  they would wait forever); a deleted job leaves the reverse index of its own
  upstreams (chaindown); its satisfied list (chain_ok) goes with its hash.
  Returns: the deleted job id.  Errors: NOTFOUND, CONFLICT. ]]
-- @include lib/err.lua
-- @include lib/lists.lua

local tenant, name = ARGV[1], ARGV[2]

local job_id = job_lookup(tenant, name)
if not job_id then return err('NOTFOUND', 'no job ' .. name .. ' for tenant ' .. tenant) end
local down = redis.call('SMEMBERS', key_chaindown(tenant, name))
if #down > 0 then
  table.sort(down)
  return err('CONFLICT', 'job ' .. name .. ' is an upstream of ' .. table.concat(down, ', ')
    .. ' (their depends_on): remove it there first, or delete them')
end
for _, u in ipairs(split(redis.call('HGET', key_job(job_id), 'upstreams') or '')) do
  redis.call('SREM', key_chaindown(tenant, u), name)
end
redis.call('ZREM', key_jobidx(), job_member(tenant, name, job_id))
redis.call('ZREM', key_schedule(), job_id)
redis.call('ZREM', key_brkopen(), job_id)
redis.call('ZREM', key_jobparked(), job_id)
redis.call('DEL', key_job(job_id))
return job_id
