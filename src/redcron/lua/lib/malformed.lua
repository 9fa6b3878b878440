--[[ malformed: an instance hash edited by hand into one no lease can use.
  A lease needs whole numbers in epoch and attempt (each lease adds 1) and
  timeout_ms (absent: none), and a name, kind and args to run.  lease.lua
  checks them inline (one tonumber per field it reads anyway) and hands an
  instance that fails to quarantine(): off its stream onto the timers, due at
  once and marked, so the next promote dead-letters it (or makes it ready,
  when the hash was fixed meanwhile). ]]

local function whole(v)
  local n = tonumber(v or '')
  return n ~= nil and n % 1 == 0
end

-- Why these fields cannot be leased, as the error the DLQ shows; nil: they can.
-- The check itself allocates nothing (lease.lua calls it for every entry);
-- only a malformed hash builds the message.
local function malformed(epoch, attempt, timeout_ms, name, kind, args)
  timeout_ms = timeout_ms or '0'
  if whole(epoch) and whole(attempt) and whole(timeout_ms) and name and name ~= ''
      and kind and args then
    return nil
  end
  local why
  for _, c in ipairs({{'epoch', epoch}, {'attempt', attempt}, {'timeout_ms', timeout_ms}}) do
    local v = c[2]
    if not tonumber(v or '') then
      why = c[1] .. (v and (" '" .. v .. "' is not a number") or ' is missing')
    elseif not whole(v) then
      why = c[1] .. " '" .. v .. "' is not a whole number"
    end
    if why then break end
  end
  if not why and (not name or name == '') then why = 'name is ' .. (name and 'empty' or 'missing') end
  if not why and not kind then why = 'kind is missing' end
  if not why and not args then why = 'args is missing' end
  return 'malformed task record: ' .. why .. '; fix or discard it'
end

-- Off the ready path: on the timers, due now, marked for promote (marker '1':
-- malformed; 'grant': its tenant lacks the grant allow_commands, lib/grant.lua).
local function quarantine(ti, iid, why, now, marker)
  redis.call('HSET', ti, 'state', 'retry_wait', 'loc', 'timer', 'due', now, 'deadline', '',
    'error', why or 'malformed task record', 'malformed', marker or '1')
  redis.call('ZADD', key_timers(), now, iid)
end

