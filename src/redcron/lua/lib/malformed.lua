--[[ malformed: why an instance hash edited by hand cannot be leased, as the
  error the DLQ shows (promote's second look, lib/malformed_recheck.lua;
  lib/quarantine.lua is lease.lua's side). ]]
-- @include lib/quarantine.lua

-- Why these fields cannot be leased, as the error the DLQ shows; nil: they can.
local function malformed(epoch, attempt, timeout_ms, name, kind, args)
  if leasable(epoch, attempt, timeout_ms, name, kind, args) then return nil end
  timeout_ms = timeout_ms or '0'
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

