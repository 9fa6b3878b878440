--[[ err: a script error "CODE message"; errors.py maps each CODE to one
  exception class (tests/lua/test_error_codes.py keeps the two in step). ]]

local function err(code, msg)
  return redis.error_reply(code .. ' ' .. msg)
end
