--[[ capacity: what fits a worker that stated its free cpu and memory
  (lease.lua ARGV[8]).  A task asking for more than is left is not leased to
  this worker: it waits at the head of its tenant's stream for one it fits. ]]
-- @include lib/streams.lua

-- How many of the next ready entries of a stream (at most n) to take: only
-- entries up to max_id when given (aged work), and only while they fit in
-- cpu_left / mem_left (nil: no limit).  Returns the count and the group's
-- last-delivered id.  An entry whose hash does not point back at it is counted
-- (taking it drops it) but uses no capacity.
local function capacity_fit(stream, n, max_id, cpu_left, mem_left)
  local after = last_delivered(stream)
  local peek = redis.call('XRANGE', stream, '(' .. after, max_id or '+', 'COUNT', n)
  if not (cpu_left or mem_left) then return #peek, after end
  local k = 0
  for _, e in ipairs(peek) do
    local f = read_ti_fit(key_ti(e[2][2]))
    if f[TI_FIT_STATE] == 'ready' and f[TI_FIT_LOC] == 'q:' .. e[1]
        and key_q(f[TI_FIT_QUEUE], f[TI_FIT_TENANT], f[TI_FIT_PRIORITY]) == stream then
      local cpu, mem = tonumber(f[TI_FIT_CPU] or '') or 0, tonumber(f[TI_FIT_MEM] or '') or 0
      if (cpu_left and cpu > cpu_left) or (mem_left and mem > mem_left) then break end
      if cpu_left then cpu_left = cpu_left - cpu end
      if mem_left then mem_left = mem_left - mem end
    end
    k = k + 1
  end
  return k, after
end
