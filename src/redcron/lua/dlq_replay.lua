--[[ dlq_replay: take dead instances out of the DLQ and make them ready again
  with a fresh retry budget.
  KEYS[1] shard prefix
  ARGV[1] now_override_ms ("" = server TIME)
  ARGV[2] the only tenant whose instances may be acted on ("" = any: the admin)
  ARGV[3..] iids
  Returns: one entry per iid: its tenant = replayed, 0 = left alone (not dead,
  another tenant's, or a task of an ended run that its job's overlap policy
  forbids reopening while another run is active, as run_retry refuses it).
  A run's task is retried as by run_retry (its downstream reset, the run reopened).
  Upholds: one place per instance (the DLQ entry is removed in the same step);
  a tenant's caller acts on its own instances only, checked here, in the same
  step (no read per id before the call). ]]
-- @include lib/clock.lua
-- @include lib/rings.lua
-- @include lib/run_reopen.lua
-- @include lib/followup.lua

local override, only = ARGV[1], ARGV[2]

local out = {}
local woken = {}
for i = 3, #ARGV do
  local iid = ARGV[i]
  local ti = key_ti(iid)
  local f = read_ti_replay(ti)
  local run, task = run_of_task(iid)
  local tenant = f[TI_REPLAY_TENANT]
  if only ~= '' and tenant ~= only then
    out[#out + 1] = 0
  elseif f[TI_REPLAY_STATE] == 'dead' and run then
    -- a run's task: replay is the run's retry (downstream reset, run reopened
    -- only if the job's overlap policy allows)
    if not run_reopen_forbidden(run) and retry_run_task(run, task, now_ms(override)) then
      out[#out + 1] = tenant or ''
    else
      out[#out + 1] = 0
    end
  elseif f[TI_REPLAY_STATE] == 'dead' then
    redis.call('XDEL', key_dlq(f[TI_REPLAY_TENANT]), string.sub(f[TI_REPLAY_LOC], 5))
    redis.call('HSET', ti, 'budget', f[TI_REPLAY_ATTEMPT], 'ended', '', 'cancel_requested', '')
    make_ready(ti, iid, f[TI_REPLAY_QUEUE], f[TI_REPLAY_TENANT], f[TI_REPLAY_PRIORITY],
      now_ms(override))
    gather_wake(woken, f[TI_REPLAY_QUEUE])
    out[#out + 1] = tenant or ''
  else
    out[#out + 1] = 0
  end
end
wake_gathered(woken)
follow_flush(now_ms(override))  -- a mapped task's map made again (lib/run_reopen.lua)
return out
