--[[ ti_fields: building an instance hash's fields for one HSET.  A field at
  its default (TI_DEFAULT_*, generated from model/fields.py TI_DEFAULTS) is
  left out: every reader takes an absent field as its default, and a retained
  instance pays for each field it keeps. ]]

local function push_field(fields, name, value)
  fields[#fields + 1] = name
  fields[#fields + 1] = value
end

-- Add name = value to `fields` unless value is (numerically) the default.
local function push_unless_default(fields, name, value, default)
  if tonumber(value) ~= tonumber(default) then push_field(fields, name, value) end
end
