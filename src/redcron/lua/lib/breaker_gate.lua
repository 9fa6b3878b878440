--[[ breaker_gate: a job's circuit breaker as lease.lua meets it (lib/breaker.lua
  has the rest): an open breaker holds the job's ready instances aside (state
  held, in attention as held:<instance id>); after its cool-down the first instance asked about
  becomes the single trial; a trial that can no longer report is replaced. ]]
-- @include lib/breaker_event.lua

-- Can the current trial still report?  Not when its hash is gone, or it is in
-- a state from which no verdict comes (terminal, or anywhere but the ready
-- stream or a lease).
local function breaker_trial_lost(trial)
  if trial == '' then return true end
  local st = redis.call('HGET', key_ti(trial), 'state')
  return not st or not (TASK_LEASED[st] or st == 'ready')
end

-- The breaker's word on leasing one run instance: 'lease' or 'hold' (lease.lua;
-- `gates`: job id -> its breaker, read once per call).  After the cool-down the
-- first instance asked about becomes the single trial.
local function breaker_gate(gates, run_id, iid, now)
  local job_id = job_of_run(run_id)
  if not job_id then return 'lease' end
  local b = gates[job_id]
  if not b then
    local j = redis.call('HMGET', key_job(job_id), 'breaker', 'breaker_until', 'breaker_trial')
    b = {mode = j[1] or '', till = tonumber(j[2] or '') or 0, trial = j[3] or ''}
    gates[job_id] = b
  end
  if b.mode == '' or (b.mode == 'trial' and b.trial == iid) then return 'lease' end
  -- the cool-down is over, or the trial can never report (its hash gone...)
  -- and would hold the job forever: this instance becomes the trial
  local lost = nil
  if b.mode == 'trial' and not b.checked then
    b.checked = true
    lost = breaker_trial_lost(b.trial) and ' (trial ' .. b.trial .. ' lost)'
  end
  if not lost and not (b.mode == 'open' and now >= b.till) then return 'hold' end
  redis.call('HSET', key_job(job_id), 'breaker', 'trial', 'breaker_trial', iid)
  breaker_event('breaker_trial', job_id, now, iid .. (lost or ''), run_id)
  b.mode, b.trial = 'trial', iid
  return 'lease'
end

-- Hold a run instance aside while its job's breaker is open (not handed out).
local function breaker_hold(ti, iid, run_id)
  redis.call('HSET', ti, 'state', 'held', 'loc', 'held')
  redis.call('ZADD', key_attention(), 0, ATTENTION.held .. iid)
end
