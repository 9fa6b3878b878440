--[[ lists: the comma lists stored in hashes (a run's tasks, a task's deps/down),
  and the names in them. ]]

-- An instance of a mapped task is named <task>[<index>] (issue 32 §2): the
-- pattern captures <task>
local MAPPED = '^(.*)%[%d+%]$'

local function split(list)
  local out = {}
  if list and list ~= '' then
    for x in string.gmatch(list, '[^,]+') do out[#out + 1] = x end
  end
  return out
end
