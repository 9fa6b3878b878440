--[[ dead: dead-letter an instance: a self-contained entry in its tenant's DLQ
  (the error and the log tail of its last attempt travel with it), the hash
  marks it dead there, result() waiters are woken and its run moves on.  Its
  count and the dead_lettered event are a follow-up (lib/followup.lua, row dead). ]]
-- @include lib/waiters.lua
-- @include lib/runs.lua
-- @include lib/followup.lua

-- Add the DLQ entry of an instance: self-contained, with the error and the log
-- tail of attempt `attempt` (nil: none ran); `at` is when it died.  Returns its id.
local function dlq_add(iid, tenant, queue, name, attempt, outcome, errtext, at)
  -- the cross-tenant DLQ list pages over dlqidx (dlq_unindex.lua drops a tenant
  -- once its stream is empty)
  redis.call('ZADD', key_dlqidx(), 0, tenant)
  local lines = {}
  if attempt then
    local tail = redis.call('XREVRANGE', key_log(iid, attempt), '+', '-', 'COUNT', 20)
    for i = #tail, 1, -1 do
      local e = tail[i][2]
      for j = 1, #e, 2 do if e[j] == 'line' then lines[#lines + 1] = e[j + 1] end end
    end
  end
  return redis.call('XADD', key_dlq(tenant), '*', 'i', iid, 'name', name or '',
    'queue', queue or '', 'attempts', attempt or 0, 'outcome', outcome, 'error', errtext or '',
    'tail', table.concat(lines, '\n'), 'at', at)
end

-- attempt: the attempt whose log tail goes with it (nil: none ran).
local function dead_letter(ti, iid, tenant, queue, name, attempt, outcome, errtext, now)
  local eid = dlq_add(iid, tenant, queue, name, attempt, outcome, errtext, now)
  redis.call('HSET', ti, 'state', 'dead', 'loc', 'dlq:' .. eid, 'ended', now)
  follow('dead', {iid, tenant or '', name or '', outcome, string.sub(errtext or '', 1, 300)})
  notify_done(ti, iid)
  run_task_ended(ti, iid, 'dead', now)
end
