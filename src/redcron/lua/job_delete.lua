--[[ job_delete: remove a job and its schedule entry; its runs stay in history
  until their retention expires, and running ones finish.
  KEYS[1] shard prefix
  ARGV[1] tenant   ARGV[2] name
  A job other jobs name in depends_on is not deleted (CONFLICT naming them:
  they would wait forever); a deleted job leaves the reverse index of its own
  upstreams (their chain_down); its own chain fields go with its hash.
  Returns: the deleted job id.  Errors: NOTFOUND, CONFLICT. ]]
-- @include lib/err.lua
-- @include lib/lists.lua
-- @include lib/chain_down.lua

local tenant, name = ARGV[1], ARGV[2]

local job_id = job_lookup(tenant, name)
if not job_id then return err('NOTFOUND', 'no job ' .. name .. ' for tenant ' .. tenant) end
local jk = key_job(job_id)
local down = split(redis.call('HGET', jk, 'chain_down'))
if #down > 0 then
  table.sort(down)
  return err('CONFLICT', 'job ' .. name .. ' is an upstream of ' .. table.concat(down, ', ')
    .. ' (their depends_on): remove it there first, or delete them')
end
for _, u in ipairs(split(redis.call('HGET', jk, 'upstreams'))) do
  chain_down_edit(tenant, u, name, false)
end
redis.call('ZREM', key_jobidx(), job_member(tenant, name, job_id))
redis.call('ZREM', key_schedule(), job_id)
redis.call('ZREM', key_attention(), ATTENTION.breaker .. job_id, ATTENTION.parked .. job_id)
redis.call('DEL', jk)
return job_id
