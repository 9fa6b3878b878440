--[[ cancel_instance: cancel one instance wherever it is (task cancel, run cancel,
  overlap cancel_previous). ]]
-- @include lib/streams.lua
-- @include lib/rings.lua
-- @include lib/breaker.lua
-- @include lib/terminal.lua
-- @include lib/runs.lua

-- Cancel one instance wherever it is.  Returns the resulting state:
-- 'cancelled', 'cancel_requested' (running: revoked by the next heartbeat),
-- or the terminal state it already had; nil when it does not exist.
local function cancel_instance(iid, now)
  local ti = key_ti(iid)
  local f = redis.call('HMGET', ti, 'state', 'loc', 'queue', 'tenant', 'priority')
  local state, loc = f[1], f[2] or ''
  if not state then return nil end
  -- dead work is terminal but still in the DLQ: cancelling takes it out
  if TASK_TERMINAL[state] and state ~= 'dead' then return state end
  if TASK_LEASED[state] then
    redis.call('HSET', ti, 'cancel_requested', '1')
    return 'cancel_requested'
  end
  local dead_run
  if state == 'ready' then
    local queue, tenant, priority = f[3], f[4], f[5]
    local stream, eid = key_q(queue, tenant, priority), string.sub(loc, 3)
    redis.call('XDEL', stream, eid)  -- not delivered: nothing to ack
    -- the ring and the aging index follow what is ready, as lease keeps them
    local aging = key_oldest(queue, priority)
    if ready_count(stream) == 0 then
      ring_leave(queue, priority, tenant)
    else
      -- the head went: the index moves to the new head (else aged up early)
      local score = tonumber(redis.call('ZSCORE', aging, tenant) or '')
      if score and entry_ms(eid) <= score then
        local head = first_ready(stream)
        if head then redis.call('ZADD', aging, 'XX', entry_ms(head), tenant) end
      end
    end
  elseif state == 'retry_wait' or state == 'scheduled' then
    redis.call('ZREM', key_timers(), iid)
  elseif state == 'held' then
    redis.call('LREM', key_held(job_of_run(redis.call('HGET', ti, 'run'))), 0, iid)
  elseif state == 'dead' then
    redis.call('XDEL', key_dlq(f[4]), string.sub(loc, 5))
    -- a dead task already counted as ended (failed) in its run: recount it
    dead_run = redis.call('HGET', ti, 'run')
    if dead_run == '' then dead_run = nil end
    if dead_run then
      redis.call('HINCRBY', key_run(dead_run), 'n_done', -1)
      redis.call('HINCRBY', key_run(dead_run), 'n_failed', -1)
    end
  end
  redis.call('HSET', ti, 'cancel_requested', '1')
  make_terminal(ti, iid, 'cancelled', now)
  -- out of the DLQ: an ended run held for it may start its retention
  if dead_run then run_dlq_left(dead_run) end
  return 'cancelled'
end
