--[[ breaker_event: every change of a job's circuit-breaker mode is an event
  (lib/events.lua): lease.lua's trial (lib/breaker_gate.lua), promote's
  cool-down (lib/breaker_cooldown.lua) and the verdicts (lib/breaker.lua). ]]
-- @include lib/events.lua

-- run_id: the run whose task moved the breaker ('' when none: a resume, a cool-down)
local function breaker_event(kind, job_id, now, detail, run_id)
  local tenant = redis.call('HGET', key_job(job_id), 'tenant') or ''
  event_add(kind, tenant, job_id, run_id or '', now, detail)
end
