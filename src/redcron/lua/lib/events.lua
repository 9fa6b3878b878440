--[[ events: record one event in the shard's events stream, which the
  notifier reads through its consumer group (docs/operations.md,
  Notifications).  Every producer writes the same fields: type, tenant, job,
  run ('' when none), at (ms), detail (short text or JSON).  The stream is
  capped at EVENTS_MAX entries (MAXLEN ~): a bound on memory when no notifier
  runs; the notifier trims what is older than its retention. ]]

local function event_add(kind, tenant, job_id, run_id, now, detail)
  redis.call('XADD', key_events(), 'MAXLEN', '~', EVENTS_MAX, '*', 'type', kind,
    'tenant', tenant or '', 'job', job_id or '', 'run', run_id or '', 'at', now,
    'detail', detail or '')
end

-- A scheduled fire `lag_ms` late: a trigger_lag event past EVENT_LAG_MS, at most
-- one per job per EVENT_LAG_EVERY_MS (the SET NX marker), so a stalled shard
-- catching up on thousands of fires records one event per job, not thousands.
local function event_lag(tenant, job_id, run_id, lag_ms, now)
  if lag_ms < EVENT_LAG_MS then return end
  if not redis.call('SET', key_lagalert(job_id), now, 'NX', 'PX', EVENT_LAG_EVERY_MS) then
    return
  end
  event_add('trigger_lag', tenant, job_id, run_id, now,
    'fired ' .. math.floor(lag_ms / 1000) .. ' s late')
end
