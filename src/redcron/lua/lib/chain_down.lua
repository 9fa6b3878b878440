--[[ chain_down: job chaining's reverse index, the field chain_down of an
  upstream job's hash: the comma list of the names of the tenant's jobs whose
  depends_on names it (job_put and job_delete keep it; lib/chain.lua reads
  it when the upstream's run succeeds).  An upstream named in a depends_on
  exists (job_put refuses an unknown one, job_delete refuses to delete a job
  whose chain_down is not empty), so the list lives on its hash. ]]
-- @include lib/list_edit.lua

local function chain_down_edit(tenant, upstream, name, add)
  local uid = job_lookup(tenant, upstream)
  if not uid then return end
  local uk = key_job(uid)
  local cur = redis.call('HGET', uk, 'chain_down') or ''
  local new = add and list_with(cur, name) or list_without(cur, name)
  if new == '' then
    redis.call('HDEL', uk, 'chain_down')
  elseif new ~= cur then
    redis.call('HSET', uk, 'chain_down', new)
  end
end
