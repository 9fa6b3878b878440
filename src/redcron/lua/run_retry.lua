--[[ run_retry: retry failed tasks of a run (all of them when none are named):
  each is ready again with a fresh retry budget, its downstream reset to
  pending, and the run reopened.
  KEYS[1] shard prefix
  ARGV[1] run_id   ARGV[2] now_override_ms   ARGV[3..] task names
  Returns: number of tasks retried (a named task whose own upstream failed and is
  not retried with it stays as it is: it could never run).
  Errors: NOTFOUND; CONFLICT when the run ended and its job's overlap policy
  (not 'allow') forbids reopening it while another run is active. ]]
-- @include lib/clock.lua
-- @include lib/err.lua
-- @include lib/run_reopen.lua
-- @include lib/mapped.lua
-- @include lib/followup.lua

local run_id = ARGV[1]
local now = now_ms(ARGV[2])
local rk = key_run(run_id)
local f = redis.call('HMGET', rk, 'state', 'tasks', 'job')
if not f[1] then return err('NOTFOUND', 'no run ' .. run_id) end
local names = {}
for i = 3, #ARGV do names[#names + 1] = ARGV[i] end  -- ARGV[3..]: task names
if #names == 0 then
  for _, iid in ipairs(run_iids(run_id, f[2])) do  -- a mapped task's instances too
    if redis.call('HGET', key_ti(iid), 'state') == 'dead' then
      names[#names + 1] = select(2, run_of_task(iid))
    end
  end
else
  for _, t in ipairs(names) do
    local st = redis.call('HGET', key_ti(run_id .. '/' .. t), 'state')
    if not st then return err('NOTFOUND', 'run ' .. run_id .. ' has no task ' .. t) end
    if st ~= 'dead' and st ~= 'cancelled' and st ~= 'upstream_failed' and st ~= 'failed' then
      return err('CONFLICT', 'task ' .. t .. ' is ' .. st .. '; only failed tasks can be retried')
    end
  end
end
if #names == 0 then return 0 end
local forbidden = run_reopen_forbidden(run_id)
if forbidden then
  return err('CONFLICT', 'another run of this job is active and its overlap policy is '
    .. forbidden .. '; retry after it ends')
end
local n = 0
for _, t in ipairs(names) do
  if retry_run_task(run_id, t, now) then n = n + 1 end
end
follow_flush(now)  -- a mapped task's map made again (lib/run_reopen.lua)
return n
