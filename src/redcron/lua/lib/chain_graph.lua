--[[ chain_graph: the upstream jobs a job may name in depends_on (job_put.lua):
  chain_refusal() returns nil, or why they are refused (text for depends_on):
  a name that is no job of the tenant (another tenant's jobs are not visible:
  the same refusal), the job itself, or a cycle through the upstreams already
  stored (each job hash's upstreams field), named as "a -> b -> a" (a depends
  on b, b on a).  It reads at most every job of the tenant's chain graph once. ]]
-- @include lib/lists.lua

local function chain_refusal(tenant, name, ups)
  local parent, stack = {}, {}
  for _, u in ipairs(ups) do
    if u == name then return 'a job cannot depend on itself (' .. name .. ')' end
    if not job_lookup(tenant, u) then
      return 'unknown job ' .. u .. ' of tenant ' .. tenant .. '; create it first'
    end
    if parent[u] == nil then
      parent[u] = name
      stack[#stack + 1] = u
    end
  end
  while #stack > 0 do
    local x = table.remove(stack)
    local xid = job_lookup(tenant, x)
    local xups = ''
    if xid then xups = redis.call('HGET', key_job(xid), 'upstreams') or '' end
    for _, y in ipairs(split(xups)) do
      if y == name then
        local path, n = {}, x
        while n ~= name do
          table.insert(path, 1, n)
          n = parent[n]
        end
        return 'job dependency cycle: ' .. name .. ' -> ' .. table.concat(path, ' -> ')
          .. ' -> ' .. name
      end
      if parent[y] == nil then
        parent[y] = x
        stack[#stack + 1] = y
      end
    end
  end
  return nil
end
