--[[ downstream: walk a run task's transitive downstream (runs.lua marks it
  failed or cancelled, run_reopen.lua resets it). ]]
-- @include lib/lists.lua

-- Visit, breadth first, the tasks named in `down` (a comma list) and what
-- follows them: visit(ti, iid) returns the visited task's own `down` list to
-- walk on, or nil to stop there.
local function walk_downstream(run_id, down, visit)
  local todo = split(down)
  local i = 1
  while i <= #todo do
    local did = run_id .. '/' .. todo[i]
    i = i + 1
    local more = visit(key_ti(did), did)
    if more then
      for _, dd in ipairs(split(more)) do todo[#todo + 1] = dd end
    end
  end
end
