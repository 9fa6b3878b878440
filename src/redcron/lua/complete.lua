--[[ complete: record successful attempts, batched.
  KEYS[1] shard prefix
  ARGV[1] worker_id
  ARGV[2] now_override_ms ("" = server TIME)
  ARGV[3..] triples: iid, epoch, result (msgpack)
  Returns: one entry per triple: 1 = recorded, 0 = lease lost (nothing written).
  The lease's stream entry is acknowledged and deleted (XACK + XDEL).
  A task of a run makes its downstream ready once all their dependencies succeeded.
  The task's last error is cleared (the attempt history keeps it); a command or
  container attempt succeeds only on exit code 0, so that is recorded too.
  Each success is a follow-up (lib/followup.lua, row attempts, with its task
  name and how long it took: from started, else leased, to now): counted,
  timed and told to its job's breaker by follow_ends.lua.  The last attempt
  of a succeeded instance keeps its holder and times in worker, leased,
  started and ended (no a:<n>: fields written for it).
  Upholds: a stale lease token writes nothing; each attempt ends once. ]]
-- @include lib/clock.lua
-- @include lib/token.lua
-- @include lib/streams.lua
-- @include lib/waiters.lua
-- @include lib/runs.lua
-- @include lib/ckeys.lua
-- @include lib/followup.lua
-- @include lib/unpark.lua

local worker = ARGV[1]
local now = now_ms(ARGV[2])
local out = {}
local drops, ended = {}, {}
for i = 3, #ARGV, 3 do
  local iid, epoch, result = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local ti = key_ti(iid)
  local f = read_ti_complete(ti)
  if token_holds(f, worker, epoch) then
    -- the fast path of end_attempt(..., 'succeeded', ...): one HSET for everything
    -- it records, one HDEL for what a succeeded instance no longer has (its place
    -- and lease; its holder and times stay as the last attempt's).  That attempt
    -- has no a:<n>: fields: the instance's state, worker, leased, started and
    -- ended say them (TaskRecord.from_fields fills them in)
    local attempt = f[TI_COMPLETE_ATTEMPT]
    local pre = 'a:' .. attempt .. ':'
    redis.call('HSET', ti, 'result', result, 'state', 'succeeded', 'ended', now)
    redis.call('HDEL', ti, 'loc', 'deadline', 'lease_entry')
    if f[TI_COMPLETE_ERROR] then redis.call('HDEL', ti, 'error') end  -- only after a failed attempt
    local began = tonumber(f[TI_COMPLETE_STARTED] or f[TI_COMPLETE_LEASED] or '')
    follow('attempts', {iid, tonumber(attempt) or 0, 'succeeded', f[TI_COMPLETE_TENANT] or '', 0, '',
      f[TI_COMPLETE_NAME] or '', began and math.max(0, now - began) or -1})
    if f[TI_COMPLETE_KIND] == 'command' or f[TI_COMPLETE_KIND] == 'container' then
      redis.call('HSET', ti, pre .. 'exit', 0, 'exit_code', 0)
    end
    local stream = key_q(f[TI_COMPLETE_QUEUE], f[TI_COMPLETE_TENANT], f[TI_COMPLETE_PRIORITY])
    drops[stream] = drops[stream] or {}
    table.insert(drops[stream], f[TI_COMPLETE_LEASE_ENTRY])
    ended[f[TI_COMPLETE_TENANT]] = ended[f[TI_COMPLETE_TENANT]] or {}
    table.insert(ended[f[TI_COMPLETE_TENANT]], iid)
    -- its concurrency key's slot goes to the key's first waiter
    ck_free(f[TI_COMPLETE_TENANT], f[TI_COMPLETE_NAME], f[TI_COMPLETE_CK], f[TI_COMPLETE_CKN], iid,
      now)
    local ttl = tonumber(f[TI_COMPLETE_RESULT_TTL_S] or '0')
    if ttl and ttl > 0 then redis.call('EXPIRE', ti, ttl) end
    if f[TI_COMPLETE_WAITERS] and f[TI_COMPLETE_WAITERS] ~= '0' then notify_done(ti, iid) end
    run_task_ended(ti, iid, 'succeeded', now)  -- a no-op outside a run
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
-- batched per stream and per tenant (a pending entry counts as neither ready
-- nor gone until here, so ready counts read above were right)
drop_entries(drops)
for tenant, iids in pairs(ended) do
  redis.call('ZREM', key_leases(tenant), unpack(iids))
  unpark(tenant)
end
follow_flush(now)
return out
