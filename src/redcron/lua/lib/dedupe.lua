--[[ dedupe: unique windows and debounce, for enqueue.lua (issue 21 §4; the
  semantics are docs/operations.md "Unique windows and debounce").  A row's
  dedupe field is '<u|d>|<digest>|<window ms>|<max wait ms>|<label>'
  (model/dedupe.py wire(); '' = none).  dedupe_plan only reads (checks
  before writes); dedupe_created and dedupe_merge write.
  - u: dedupe:<tenant>:unique:<digest> holds the id of the task that has the key
    (PX = the window: only garbage collection).  It matches while that task
    has not ended (TASK_TERMINAL) and now < its unique_until; a match is
    returned and nothing is written.
  - d: dedupe:<tenant>:debounce:<digest> holds the id of the key's open group (PX =
    until its start).  The group is open while that task is still 'scheduled'
    (on the timers) and now < its due: a call then moves its due to
    now + (its own) debounce, capped at debounce_first + the group's max_wait
    (the first call's, max_wait_ms), and replaces its args.
  The expiry of a key never decides: its task's hash does, against `now`. ]]
-- @include lib/ti_fields.lua

-- The row's dedupe field as a table; nil when empty; nil, message when malformed.
local function dedupe_parse(spec)
  if spec == nil or spec == '' then return nil end
  local mode, digest, window, cap, label =
    string.match(spec, '^([ud])|(%x+)|(%d+)|(%d+)|(.*)$')
  if not mode then
    return nil, 'dedupe must be <u|d>|<hex digest>|<window ms>|<max wait ms>|<label>, got '
      .. spec
  end
  window, cap = tonumber(window), tonumber(cap)
  if window < 1 then return nil, 'dedupe window must be >= 1 ms' end
  if mode == 'u' and cap ~= 0 then return nil, 'dedupe max wait applies to debounce only' end
  if cap ~= 0 and cap < window then return nil, 'dedupe max wait must be >= the debounce' end
  return {mode = mode, digest = digest, window = window, cap = cap, label = label}
end

-- Decide one row: returns 'create', or 'fold', group (the existing task's
-- group: {iid, first, cap}).  `groups` (per call) holds the keys this call has
-- created or found, so two rows of one batch with the same key fold too.
local function dedupe_plan(groups, d, tenant, iid, now)
  local gk = d.mode .. '\0' .. tenant .. '\0' .. d.digest
  local g = groups[gk]
  if g == nil then
    if d.mode == 'u' then
      local held = redis.call('GET', key_dedupe(tenant, 'unique', d.digest))
      if held then
        local f = redis.call('HMGET', key_ti(held), 'state', 'unique_until')
        if f[1] and not TASK_TERMINAL[f[1]] and now < (tonumber(f[2]) or 0) then
          g = {iid = held}
        end
      end
    else
      local held = redis.call('GET', key_dedupe(tenant, 'debounce', d.digest))
      if held then
        local f = redis.call('HMGET', key_ti(held), 'state', 'due', 'debounce_first',
          'max_wait_ms')
        if f[1] == 'scheduled' and now < (tonumber(f[2]) or 0) then
          g = {iid = held, first = tonumber(f[3]) or now, cap = tonumber(f[4]) or 0}
        end
      end
    end
    if g then groups[gk] = g end
  end
  if g then return 'fold', g end
  groups[gk] = {iid = iid, first = now, cap = d.cap}
  return 'create'
end

-- A created row: its fields (onto `fields`, the instance's HSET) and its key.
-- A debounced row is due `due` (now + debounce: enqueue.lua's delay).
local function dedupe_created(fields, d, tenant, iid, now, due)
  if d.mode == 'u' then
    push_field(fields, 'unique_key', d.label)
    push_field(fields, 'unique_until', now + d.window)
    redis.call('SET', key_dedupe(tenant, 'unique', d.digest), iid, 'PX', d.window)
  else
    push_field(fields, 'debounce_key', d.label)
    push_field(fields, 'debounce_ms', d.window)
    if d.cap > 0 then push_field(fields, 'max_wait_ms', d.cap) end
    push_field(fields, 'debounce_first', now)
    push_field(fields, 'debounce_last', now)
    push_field(fields, 'debounce_calls', 1)
    redis.call('SET', key_dedupe(tenant, 'debounce', d.digest), iid, 'PX', math.max(1, due - now))
  end
end

-- A debounce call folded into the open group g: the last call's args win, the
-- start moves to now + debounce, never past the first call + the group's max wait.
local function dedupe_merge(g, d, tenant, args, now)
  local due = now + d.window
  if g.cap > 0 and g.first + g.cap < due then due = g.first + g.cap end
  local ti = key_ti(g.iid)
  redis.call('HSET', ti, 'args', args, 'due', due, 'debounce_last', now)
  redis.call('HINCRBY', ti, 'debounce_calls', 1)
  redis.call('ZADD', key_timers(), due, g.iid)
  redis.call('PEXPIRE', key_dedupe(tenant, 'debounce', d.digest), math.max(1, due - now))
end
