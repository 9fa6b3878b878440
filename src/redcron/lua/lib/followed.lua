--[[ followed: the entries a follow-up script applies (follow_ends.lua,
  follow_runs.lua, follow_chain.lua).  Each is read by id and deleted in the
  same call that applies it, so an entry is applied once: an id already
  applied (or never written) reads nothing and is skipped. ]]

-- The entry `id` of the shard's followups stream as a table of its fields
-- (JSON fields decoded), or nil when it is gone; it is deleted.
local function followed(id, kind)
  local FK = key_followups()
  local e = redis.call('XRANGE', FK, id, id)[1]
  if not e then return nil end
  local f = {}
  for j = 1, #e[2], 2 do f[e[2][j]] = e[2][j + 1] end
  if f.kind ~= kind then return nil end  -- another script's: left for it
  redis.call('XDEL', FK, id)
  for name, value in pairs(f) do
    if name ~= 'kind' and name ~= 'at' then f[name] = cjson.decode(value) end
  end
  f.at = tonumber(f.at)
  return f
end

-- Apply every entry of `kind` named by ARGV[first..], in order: apply(e) per
-- entry (its fields decoded, e.at its time).  Returns the number applied and
-- the last one's at (0: none).
local function follow_entries(kind, first, apply)
  local applied, last_at = 0, 0
  for i = first, #ARGV do
    local e = followed(ARGV[i], kind)
    if e then
      applied, last_at = applied + 1, e.at
      apply(e)
    end
  end
  return applied, last_at
end
