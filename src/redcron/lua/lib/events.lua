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
