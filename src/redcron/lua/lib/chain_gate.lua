--[[ chain_gate: job chaining (a job's depends_on) at the moment a run would
  start.  A job with upstreams keeps the names of those that have had a
  succeeded run since its last chained or scheduled run in its hash's
  chain_ok, a comma list (lib/chain.lua adds them).  chain_satisfied() says
  whether every upstream is in it; chain_gate() is what fire_one asks of a
  fire from the job's own trigger (cron, every, at, catch-up; never a manual
  one): go on (nil; the satisfied list is used up by this run), or hold the
  fire until the upstreams have succeeded ({'waiting', run_id}: the job hash
  keeps it in chain_wait as "<fire ms>|<trigger>", and lib/chain.lua starts
  it then).  At most one fire waits: a later one while it does is recorded as
  a skipped run. ]]
-- @include lib/lists.lua
-- @include lib/run_create.lua

local function chain_satisfied(jk, upstreams)
  local ok = ',' .. (redis.call('HGET', jk, 'chain_ok') or '') .. ','
  for _, u in ipairs(split(upstreams)) do
    if not string.find(ok, ',' .. u .. ',', 1, true) then return false end
  end
  return true
end

local function chain_gate(job_id, jk, upstreams, fire_ms, trigger, run_id, now)
  if not upstreams or upstreams == '' or trigger == 'manual' then return nil end
  if chain_satisfied(jk, upstreams) then
    redis.call('HDEL', jk, 'chain_ok')
    return nil
  end
  local held = redis.call('HGET', jk, 'chain_wait')
  if held and held ~= '' then
    record_skipped(job_id, run_id, tonumber(fire_ms), trigger, now,
      'depends_on: an earlier fire is still waiting for its upstream jobs')
    return {'skipped', run_id}
  end
  redis.call('HSET', jk, 'chain_wait', fire_ms .. '|' .. trigger)
  return {'waiting', run_id}
end
