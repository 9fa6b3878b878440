--[[ list_edit: a comma list (lib/lists.lua) with one name added or removed. ]]
-- @include lib/lists.lua

-- the comma list with x in it (added last when it is not), and without it
local function list_with(list, x)
  if not list or list == '' then return x end
  if string.find(',' .. list .. ',', ',' .. x .. ',', 1, true) then return list end
  return list .. ',' .. x
end

local function list_without(list, x)
  local out = {}
  for _, y in ipairs(split(list)) do
    if y ~= x then out[#out + 1] = y end
  end
  return table.concat(out, ',')
end
