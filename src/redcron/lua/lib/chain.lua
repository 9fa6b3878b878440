--[[ chain: job chaining, when a run of an upstream job ends succeeded
  (lib/runs.lua calls chain_upstream_succeeded).  Every job naming it in its
  depends_on (the upstream's chain_down, lib/chain_down.lua) notes it as
  satisfied (its own chain_ok, a comma list); a job whose upstreams are all
  satisfied starts:
  - a job without a trigger of its own (chain = upstreams) starts a run now,
    trigger 'chain', fire time = now (run id <job id>@<now ms>, the next free
    ms if a run has it);
  - a job with a trigger (chain = trigger) starts only the fire that waits for
    its upstreams (chain_wait, lib/chain_gate.lua), with that fire's time and
    run id; with none waiting, its next trigger fire goes through at once.
  A paused job notes the upstream and starts nothing.  The run takes the
  job's overlap policy as a scheduled fire does (skip and buffer_one; allow
  and cancel_previous start it beside the active one).  All of this happens
  in the script that ends the upstream run: never lost, never doubled. ]]
-- @include lib/lists.lua
-- @include lib/list_edit.lua
-- @include lib/run_create.lua
-- @include lib/chain_gate.lua

local function chain_start(job_id, jk, fire_ms, trigger, now)
  local rid = make_run_id(job_id, fire_ms)
  if trigger == 'chain' then
    local tries = 0
    while redis.call('EXISTS', key_run(rid)) == 1 and tries < 1000 do
      fire_ms, tries = fire_ms + 1, tries + 1
      rid = make_run_id(job_id, fire_ms)
    end
  end
  redis.call('HDEL', jk, 'chain_ok')  -- used up by this fire
  if redis.call('EXISTS', key_run(rid)) == 1 then return end
  redis.call('HSET', jk, 'last_fire', fire_ms)
  redis.call('HINCRBY', key_counters(), 'fires', 1)
  redis.call('HINCRBY', key_counters(), 'fires_chained', 1)
  local overlap = redis.call('HGET', jk, 'overlap') or JOB_DEFAULT_OVERLAP
  if (overlap == 'skip' or overlap == 'buffer_one')
      and redis.call('SCARD', key_active(job_id)) > 0 then
    local held = redis.call('HGET', jk, 'buffered')
    if overlap == 'buffer_one' and not (held and held ~= '') then
      redis.call('HSET', jk, 'buffered', fire_ms .. '|' .. trigger)
      return
    end
    record_skipped(job_id, rid, fire_ms, trigger, now, 'overlap: previous run still going')
    return
  end
  create_run(job_id, rid, fire_ms, trigger, now, '')
end

local function chain_upstream_succeeded(job_id, now)
  local j = redis.call('HMGET', key_job(job_id), 'tenant', 'name', 'chain_down')
  local tenant, name = j[1], j[2]
  if not tenant or not name then return end
  local down = split(j[3])
  if #down == 0 then return end
  table.sort(down)  -- one order on every replica and in every test
  for _, dn in ipairs(down) do
    local did = job_lookup(tenant, dn)
    if did then
      local dk = key_job(did)
      local g = redis.call('HMGET', dk, 'upstreams', 'chain', 'paused', 'chain_wait', 'chain_ok')
      if g[1] and g[1] ~= '' then
        local ok = list_with(g[5], name)
        if ok ~= g[5] then redis.call('HSET', dk, 'chain_ok', ok) end
        if g[3] ~= '1' and chain_satisfied(dk, g[1]) then
          if g[2] == 'upstreams' then
            chain_start(did, dk, now, 'chain', now)
          elseif g[4] and g[4] ~= '' then
            local fire_ms, trig = string.match(g[4], '^(%d+)|(.*)$')
            redis.call('HDEL', dk, 'chain_wait')
            if fire_ms then chain_start(did, dk, tonumber(fire_ms), trig, now) end
          end
        end
      end
    end
  end
end
