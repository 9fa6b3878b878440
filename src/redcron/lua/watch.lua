--[[ watch: register a result() waiter unless the instance already ended.
  KEYS[1] shard prefix
  ARGV[1] iid
  Returns: the current state; when it is not terminal (TASK_TERMINAL, generated
  from states.py), one token will be pushed to done:<iid> when it becomes so.
  Errors: NOTFOUND. ]]
-- @include lib/err.lua

local iid = ARGV[1]

local ti = key_ti(iid)
local state = redis.call('HGET', ti, 'state')
if not state then return err('NOTFOUND', 'no task ' .. iid) end
if TASK_TERMINAL[state] then return state end
redis.call('HINCRBY', ti, 'waiters', 1)
return state
