--[[ grant: the admin's grant of command and container tasks to a tenant, the
  tenant setting allow_commands ("1" = granted; anything else, or absent, is
  not).  job_put and enqueue refuse such tasks without it (FORBIDDEN); lease
  checks it again, since a grant can be revoked while work is queued
  (DESIGN §8a). ]]
-- @include lib/err.lua

-- Whether tasks of this kind run a program the tenant chose (command, container).
local function needs_grant(kind)
  return kind ~= 'python'
end

local function granted(tenant)
  return redis.call('HGET', key_tenant(tenant), 'allow_commands') == '1'
end

-- The refusal: names the setting and the admin command that grants it.
local function grant_message(tenant, what)
  return 'tenant ' .. tenant .. ' may not run command or container tasks (' .. what
    .. '): the tenant setting allow_commands is off; an admin grants it with '
    .. '`redcron tenants set ' .. tenant .. ' --allow-commands`'
end

local function not_granted(tenant, what)
  return err('FORBIDDEN', grant_message(tenant, what))
end
