--[[ attempts: check a lease token; end an attempt and move the instance on. ]]
-- @include lib/streams.lua
-- @include lib/token.lua
-- @include lib/rings.lua
-- @include lib/terminal.lua
-- @include lib/dead.lua
-- @include lib/ckeys.lua
-- @include lib/followup.lua
-- @include lib/unpark.lua
-- @include lib/wake.lua

-- Does (worker, epoch) still hold a valid lease on this instance?
local function token_ok(ti, worker, epoch)
  return token_holds(read_ti_token(ti), worker, epoch)
end

--[[ End the current attempt and move the instance to its next place:
  succeeded/cancelled -> terminal; retryable with budget left -> timer (or
  ready at once when delay is 0); otherwise -> the tenant's DLQ.
  outcome: succeeded | failed | timed_out | lost | cancelled
  delay_ms: '' = backoff min(base * 2^(n-1), cap) scaled by frac (full jitter)
  counter: the stats field a retry counts under (default 'retries')
  Every end is a follow-up (lib/followup.lua, row attempts): counted, timed,
  and the breaker's verdict (follow_ends.lua); a hand-back (counter
  'handed_back') counts only in the lifetime counters.
  Returns the new state and, for a retry, the delay in ms before the next
  attempt may run (0: ready at once); nil otherwise. ]]
local function end_attempt(ti, iid, outcome, errtext, retryable, delay_ms, exitcode, now, frac,
    counter)
  local f = read_ti_end(ti)
  -- a field edited by hand into text must not fail the whole batch: defaults
  local n = tonumber(f[TI_END_ATTEMPT] or '0') or 0
  local tenant, queue, priority = f[TI_END_TENANT], f[TI_END_QUEUE], f[TI_END_PRIORITY]
  local pre = 'a:' .. n .. ':'
  local began = tonumber(f[TI_END_STARTED] or f[TI_END_LEASED] or '')
  if outcome ~= 'succeeded' then
    -- the attempt goes into the history (a:<n>:): its times leave the current
    -- attempt's fields (leased, started) for the next lease; worker stays until
    -- then (a cancelled attempt's heartbeat is answered revoked by it).  A
    -- succeeded (so last) attempt keeps them, and its outcome and end are the
    -- instance's state and ended (make_terminal below), as complete.lua
    local args = {ti, pre .. 'outcome', outcome, pre .. 'ended', now}
    for _, c in ipairs({{'w', f[TI_END_WORKER]}, {'l', f[TI_END_LEASED]}, {'s', f[TI_END_STARTED]}}) do
      if c[2] then args[#args + 1], args[#args + 2] = pre .. c[1], c[2] end
    end
    redis.call('HSET', unpack(args))
    redis.call('HDEL', ti, 'leased', 'started')
  end
  local row = {iid, n, outcome, tenant or '', counter == 'handed_back' and 1 or 0, '',
    f[TI_END_NAME] or '', began and math.max(0, now - began) or -1}
  follow('attempts', row)
  if errtext ~= nil and errtext ~= '' then
    redis.call('HSET', ti, pre .. 'error', errtext, 'error', errtext)
  end
  if exitcode ~= nil and exitcode ~= '' then
    redis.call('HSET', ti, pre .. 'exit', exitcode, 'exit_code', exitcode)
  end
  drop_entry(key_q(queue, tenant, priority), f[TI_END_LEASE_ENTRY])
  redis.call('ZREM', key_leases(tenant), iid)
  unpark(tenant)
  -- its concurrency key's slot goes to the key's first waiter
  ck_free(tenant, f[TI_END_NAME], f[TI_END_CK], f[TI_END_CKN], iid, now)
  redis.call('HDEL', ti, 'deadline', 'lease_entry')
  if outcome == 'succeeded' then
    -- as complete.lua: the history keeps the error
    redis.call('HDEL', ti, 'error')
    make_terminal(ti, iid, 'succeeded', now)
    return 'succeeded'
  end
  if outcome == 'cancelled' or f[TI_END_CANCEL_REQUESTED] == '1' then
    make_terminal(ti, iid, 'cancelled', now)
    return 'cancelled'
  end
  local used = n - (tonumber(f[TI_END_BUDGET] or TI_DEFAULT_BUDGET) or 0)
  if retryable == '1' and used < (tonumber(f[TI_END_MAX_ATTEMPTS] or '1') or 1) then
    local delay
    if delay_ms ~= nil and delay_ms ~= '' then
      delay = tonumber(delay_ms)
    else
      local base = tonumber(f[TI_END_RETRY_BASE_MS] or TI_DEFAULT_RETRY_BASE_MS) or 1000
      local ceiling = base * (2 ^ (used - 1))
      local cap = tonumber(f[TI_END_RETRY_CAP_MS] or TI_DEFAULT_RETRY_CAP_MS) or 3600000
      if ceiling > cap then ceiling = cap end
      delay = math.floor(ceiling * tonumber(frac))
    end
    row[6] = counter or 'retries'
    if delay <= 0 then
      wake(queue, 1)
      -- scheduled: its task has a rate, it goes by the timers first (lib/rate.lua)
      return make_ready(ti, iid, queue, tenant, priority, now) and 'ready' or 'scheduled', 0
    end
    redis.call('ZADD', key_timers(), now + delay, iid)
    redis.call('HSET', ti, 'state', 'retry_wait', 'loc', 'timer', 'due', now + delay)
    return 'retry_wait', delay
  end
  dead_letter(ti, iid, tenant, queue, f[TI_END_NAME], n, outcome, errtext, now)
  return 'dead'
end
