--[[ cancel_instance: cancel one instance wherever it is (task cancel, run cancel,
  overlap cancel_previous). ]]
-- @include lib/attempts.lua
-- @include lib/streams.lua
-- @include lib/rings.lua
-- @include lib/terminal.lua
-- @include lib/ckeys.lua
-- @include lib/followup.lua

-- Cancel one instance wherever it is.  Returns the resulting state and whether
-- this call ended it: ('cancelled', true), or the terminal state it already had
-- and false (nothing written); nil when it does not exist.  A third value is
-- true when the attempt was leased: it ends 'cancelled' here and now (its token
-- no longer matches a leased state, so the worker's complete/fail is refused as
-- a zombie's is, and its heartbeat answers revoked), but its code may still be
-- running until the worker kills it.  The lease and its cap slot end with the
-- attempt (docs/architecture.md, "Cancel").
local function cancel_instance(iid, now)
  local ti = key_ti(iid)
  local f = redis.call('HMGET', ti, 'state', 'loc', 'queue', 'tenant', 'priority', 'name', 'ck',
    'ckn')
  local state, loc = f[1], f[2] or ''
  if not state then return nil end
  -- dead work is terminal but still in the DLQ: cancelling takes it out
  if TASK_TERMINAL[state] and state ~= 'dead' then return state, false end
  if TASK_LEASED[state] then
    redis.call('HSET', ti, 'cancel_requested', '1')
    end_attempt(ti, iid, 'cancelled', 'cancelled while ' .. state, '0', '', '', now, '0')
    return 'cancelled', true, true
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
    -- a woken waiter gives back the slot it reserved
    if f[7] and f[6] then ck_free(tenant, f[6], f[7], f[8], iid, now) end
  elseif state == 'waiting' then
    if f[6] and f[7] then ck_unwait(f[4], f[6], f[7], iid) end
  elseif state == 'retry_wait' or state == 'scheduled' then
    redis.call('ZREM', key_timers(), iid)
    -- a woken waiter waiting for its rate's turn gives back its reservation
    if f[7] and f[6] then ck_free(f[4], f[6], f[7], f[8], iid, now) end
  elseif state == 'held' then
    redis.call('ZREM', key_attention(), ATTENTION.held .. iid)
  elseif state == 'dead' then
    redis.call('XDEL', key_dlq(f[4]), string.sub(loc, 5))
    -- a dead task already counted as ended (failed) in its run: recount it
    local task
    dead_run, task = run_of_task(iid)
    if dead_run then
      redis.call('HINCRBY', key_run(dead_run), 'n_done', -1)
      redis.call('HINCRBY', key_run(dead_run), 'n_failed', -1)
      local node = string.match(task, MAPPED)  -- and in its mapped task's count
      if node then redis.call('HINCRBY', key_ti(dead_run .. '/' .. node), 'map_done', -1) end
    end
  end
  redis.call('HSET', ti, 'cancel_requested', '1')
  make_terminal(ti, iid, 'cancelled', now)
  -- its retention may start now that it holds no dead task: a follow-up
  if dead_run then follow('runs', {dead_run, 'dlq_left', f[4] or ''}) end
  return 'cancelled', true, false
end
