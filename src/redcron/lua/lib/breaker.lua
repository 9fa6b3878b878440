--[[ breaker: a job's circuit breaker (docs/architecture.md, Fair dispatch):
  how attempts move it (follow_ends.lua), its cool-down (promote), resume
  (job_pause); lease.lua's side is lib/breaker_gate.lua.
  Job hash fields: breaker ('' = closed | open | trial), breaker_until (ms),
  breaker_trial (the trial instance), and the settings JobStore writes:
  breaker_ratio, breaker_min, breaker_window_s, breaker_cooldown_s (absent:
  JOB_DEFAULT_*, as every setting of the job hash), and
  breaker_minutes: the attempts of the job's tasks per minute, as
  "<minute>:<attempts>:<failed>" comma-separated, only the minutes with
  attempts that are still in the window (breaker_record drops the others as it
  writes, so the field never outgrows the window).  When the
  failed share over the window reaches the ratio (with at least breaker_min
  attempts) the breaker opens and lease.lua holds the job's ready instances
  aside (state held, loc held, in the shard's attention ZSET as held:<instance
  id>, which a job's run ids start: ZRANGEBYLEX finds a job's) instead of
  handing them out.
  After the cool-down one trial task is leased: its success closes the
  breaker and releases the held work, its failure reopens it.  jobs resume
  closes it too.  Every change is an entry in the events stream, and the shard's
  attention ZSET lists the jobs whose breaker is not closed (breaker:<job>).
  Every other end of the trial reopens it too, or the breaker would stay in
  'trial' with nothing left to report and the held work stuck: a trial
  cancelled (ready or running, by task or run cancel) or ended in any other
  non-success way reopens it with its cool-down; one handed back at worker
  shutdown reopens it with the cool-down served (the next lease or promote
  picks a new trial); a trial whose hash is gone or that can no longer
  report is replaced by the next instance lease.lua asks about.
  Opening also sets a cool-down timer (brk:<job> in the timer set): when it
  is due, promote makes the first held instance the trial, so held work
  gets its trial even when no new work of the job comes in. ]]
-- @include lib/rings.lua
-- @include lib/breaker_event.lua
-- @include lib/held.lua

-- Put the held instances of a job back on their ready streams (bounded), in
-- instance id order (a scheduled run's id holds its fire time: oldest first).
local function breaker_release(job_id, now)
  local ak, held = held_of(job_id, 5000)
  if #held > 0 then redis.call('ZREMRANGEBYLEX', ak, '[' .. held[1], '[' .. held[#held]) end
  local n = 0
  local woken = {}
  for _, member in ipairs(held) do
    local iid = held_iid(member)
    local ti = key_ti(iid)
    local f = redis.call('HMGET', ti, 'state', 'queue', 'tenant', 'priority')
    if f[1] == 'held' then
      make_ready(ti, iid, f[2], f[3], f[4], now)
      gather_wake(woken, f[2])
      n = n + 1
    end
  end
  wake_gathered(woken)
  return n
end

local function breaker_close(job_id, now, why, run_id)
  local jk = key_job(job_id)
  if (redis.call('HGET', jk, 'breaker') or '') == '' then return end
  redis.call('HSET', jk, 'breaker', '', 'breaker_until', '', 'breaker_trial', '')
  redis.call('ZREM', key_timers(), 'brk:' .. job_id)
  redis.call('ZREM', key_attention(), ATTENTION.breaker .. job_id)
  local n = breaker_release(job_id, now)
  breaker_event('breaker_closed', job_id, now, why .. '; released ' .. n .. ' held', run_id)
end

-- Open (or reopen) a job's breaker until `till`; its cool-down timer makes
-- promote pick a held instance as the trial then (breaker_cooldown_due).
local function breaker_open(job_id, till)
  redis.call('HSET', key_job(job_id), 'breaker', 'open', 'breaker_until', till, 'breaker_trial', '')
  redis.call('ZADD', key_timers(), till, 'brk:' .. job_id)
  redis.call('ZADD', key_attention(), 0, ATTENTION.breaker .. job_id)
end

-- The trial `iid` ended or left its place without a verdict (cancelled, handed
-- back, dead-lettered or marked by its run...): reopen the breaker, with the
-- cool-down (or, when `served`, due at once: a new trial is picked next).
-- A no-op unless iid is the job's current trial.
local function breaker_trial_ended(iid, run_id, now, why, served)
  local job_id = job_of_run(run_id)
  if not job_id then return end
  local jk = key_job(job_id)
  local j = redis.call('HMGET', jk, 'breaker', 'breaker_trial', 'breaker_cooldown_s')
  if j[1] ~= 'trial' or j[2] ~= iid then return end
  local till = now
  if not served then
    till = now + (tonumber(j[3]) or tonumber(JOB_DEFAULT_BREAKER_COOLDOWN_S)) * 1000
  end
  breaker_open(job_id, till)
  breaker_event('breaker_reopened', job_id, now, 'trial task ' .. iid .. ' ' .. why, run_id)
end

-- Record how one attempt of a run's task ended; trip or settle the breaker.
local function breaker_record(iid, run_id, failed, now)
  local job_id = job_of_run(run_id)
  if not job_id then return end
  local jk = key_job(job_id)
  local j = redis.call('HMGET', jk, 'breaker', 'breaker_trial', 'breaker_ratio', 'breaker_min',
    'breaker_window_s', 'breaker_cooldown_s', 'breaker_minutes', 'version')
  if not j[8] then return end  -- the job is gone
  local mode = j[1] or ''  -- the breaker's: '' (closed), open or trial
  local cooldown_ms = (tonumber(j[6]) or tonumber(JOB_DEFAULT_BREAKER_COOLDOWN_S)) * 1000
  if mode == 'trial' and j[2] == iid then
    if failed then
      breaker_open(job_id, now + cooldown_ms)
      breaker_event('breaker_reopened', job_id, now, 'trial task ' .. iid .. ' failed', run_id)
    else
      breaker_close(job_id, now, 'trial task ' .. iid .. ' succeeded', run_id)
    end
    return
  end
  local minute = math.floor(now / 60000)
  local window_s = tonumber(j[5]) or tonumber(JOB_DEFAULT_BREAKER_WINDOW_S)
  local window_min = math.max(1, math.ceil(window_s / 60))
  local first = minute - window_min + 1
  -- this attempt into its minute; minutes before the window dropped; n and f
  -- sum the window's (a minute after this one, from an end applied out of
  -- order, is kept but not counted)
  local kept, n, f = {}, 0, 0
  local this_n, this_f = 1, failed and 1 or 0
  for m, a, b in string.gmatch(j[7] or '', '(%d+):(%d+):(%d+)') do
    m, a, b = tonumber(m), tonumber(a), tonumber(b)
    if m == minute then
      this_n, this_f = this_n + a, this_f + b
    elseif m >= first then
      kept[#kept + 1] = m .. ':' .. a .. ':' .. b
      if m < minute then n, f = n + a, f + b end
    end
  end
  kept[#kept + 1] = minute .. ':' .. this_n .. ':' .. this_f
  n, f = n + this_n, f + this_f
  redis.call('HSET', jk, 'breaker_minutes', table.concat(kept, ','))
  if not failed or mode ~= '' then return end
  if n >= (tonumber(j[4]) or tonumber(JOB_DEFAULT_BREAKER_MIN))
      and f >= (tonumber(j[3]) or tonumber(JOB_DEFAULT_BREAKER_RATIO)) * n then
    breaker_open(job_id, now + cooldown_ms)
    breaker_event('breaker_opened', job_id, now, f .. ' of ' .. n .. ' attempts failed', run_id)
  end
end

-- How one attempt of a run's task ended (end_attempt): a verdict (succeeded,
-- failed, timed out, lost) is recorded; a cancelled or handed-back attempt is
-- not counted, but if it was the trial the breaker reopens.
local function breaker_attempt_ended(iid, run_id, outcome, counter, now)
  if counter == 'handed_back' then
    breaker_trial_ended(iid, run_id, now, 'handed back at worker shutdown', true)
  elseif outcome == 'cancelled' then
    breaker_trial_ended(iid, run_id, now, 'cancelled', false)
  else
    breaker_record(iid, run_id, outcome ~= 'succeeded', now)
  end
end
