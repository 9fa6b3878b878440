--[[ progress: store what running attempts say of their progress (issue 34 §1),
  each write fenced by its lease token, as a heartbeat is.
  KEYS[1] shard prefix
  ARGV[1] worker_id
  ARGV[2] now_override_ms ("" = server TIME)
  ARGV[3] recent_max: the most recent messages an instance keeps
  ARGV[4..] quadruples: iid, epoch, latest (JSON {done, total?, message?}),
  notes (JSON array of {done, message}: the messages given since the last
  write, oldest first)
  Returns: {1|0, ...}, one per quadruple: 1 stored; 0 the token does not name
  the current attempt (lost, reaped, cancelled, superseded): nothing written.
  Writes on ti:<iid>: `progress` (the latest value, with `at` = now and the
  `attempt`) and, when notes came, `progress_recent` (the last recent_max
  notes, each with its `at` and `attempt`).  Both stay bounded however often
  a task reports; a value edited by hand into non-JSON is started again.
  Upholds: a stale lease token writes nothing. ]]
-- @include lib/clock.lua
-- @include lib/token.lua

local worker = ARGV[1]
local now = now_ms(ARGV[2])
local keep = tonumber(ARGV[3])
local out = {}
for i = 4, #ARGV, 4 do
  local iid, epoch, latest, notes = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local ti = key_ti(iid)
  local f = read_ti_progress(ti)
  local stored = 0
  if token_holds(f, worker, epoch) then
    local attempt = tonumber(f[TI_PROGRESS_ATTEMPT]) or 0
    local value = cjson.decode(latest)
    value.at, value.attempt = now, attempt
    redis.call('HSET', ti, 'progress', cjson.encode(value))
    local new = cjson.decode(notes)
    if #new > 0 then
      local ok, recent = pcall(cjson.decode, redis.call('HGET', ti, 'progress_recent') or '[]')
      if not ok or type(recent) ~= 'table' then recent = {} end
      for _, note in ipairs(new) do
        note.at, note.attempt = now, attempt
        recent[#recent + 1] = note
      end
      local kept = {}
      for j = math.max(1, #recent - keep + 1), #recent do kept[#kept + 1] = recent[j] end
      redis.call('HSET', ti, 'progress_recent', cjson.encode(kept))
    end
    stored = 1
  end
  out[#out + 1] = stored
end
return out
