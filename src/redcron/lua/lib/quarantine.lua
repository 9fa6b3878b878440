--[[ quarantine: lease.lua's side of an instance hash edited by hand into one no
  lease can use (lib/malformed.lua says why, for promote).  A lease needs whole
  numbers in epoch and attempt (each lease adds 1) and timeout_ms (absent:
  none), and a name, kind and args to run; lease.lua checks them inline (one
  tonumber per field it reads anyway) and hands an instance that fails to
  quarantine(): off its stream onto the timers, due at once and marked, so the
  next promote dead-letters it with the reason (or makes it ready, when the
  hash was fixed meanwhile). ]]

local function whole(v)
  local n = tonumber(v or '')
  return n ~= nil and n % 1 == 0
end

-- Can a lease use these fields (truthy: yes)?  HMGET reads a missing field as
-- false.  Allocates nothing (lease.lua asks for every entry).
local function leasable(epoch, attempt, timeout_ms, name, kind, args)
  return whole(epoch) and whole(attempt) and whole(timeout_ms or '0') and name and name ~= ''
    and kind and args
end

-- Off the ready path: on the timers, due now, marked for promote (marker '1':
-- malformed; 'grant': its tenant lacks the grant allow_commands, lib/grant.lua).
local function quarantine(ti, iid, why, now, marker)
  redis.call('HSET', ti, 'state', 'retry_wait', 'loc', 'timer', 'due', now, 'deadline', '',
    'error', why or 'malformed task record', 'malformed', marker or '1')
  redis.call('ZADD', key_timers(), now, iid)
end

