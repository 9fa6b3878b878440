--[[ breaker_cooldown: a job's circuit-breaker cool-down timer is due (promote.lua;
  lib/breaker.lua has the rest of the breaker). ]]
-- @include lib/rings.lua
-- @include lib/breaker_event.lua
-- @include lib/held.lua
-- @include lib/wake.lua

-- The cool-down timer of a job is due (promote): if the breaker is still open
-- and work is held, the first held instance becomes the trial and goes back
-- on its ready stream.  Returns 1 when a trial was made ready.
local function breaker_cooldown_due(job_id, now)
  local jk = key_job(job_id)
  local j = redis.call('HMGET', jk, 'breaker', 'breaker_until')
  if j[1] ~= 'open' or now < (tonumber(j[2] or '') or 0) then return 0 end
  -- the job's held instances (attention members held:<run id>/<task>), oldest
  -- fire first; bounded: cancel removes its member, so they are rarely stale
  local ak, held = held_of(job_id, 100)
  for _, member in ipairs(held) do
    redis.call('ZREM', ak, member)
    local iid = held_iid(member)
    local ti = key_ti(iid)
    local f = redis.call('HMGET', ti, 'state', 'queue', 'tenant', 'priority')
    if f[1] == 'held' then
      redis.call('HSET', jk, 'breaker', 'trial', 'breaker_trial', iid)
      breaker_event('breaker_trial', job_id, now, iid, run_of_task(iid))
      make_ready(ti, iid, f[2], f[3], f[4], now)
      wake(f[2], 1)
      return 1
    end
  end
  return 0
end
