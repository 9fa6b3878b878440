--[[ wake: idle workers of a queue block on its list wake:<queue>
  (engine/leases.py wait_for_work); the list is bounded by WAKE_MAX. ]]

-- Wake up to n (>= 1) idle workers of a queue.
local function wake(queue, n)
  local wk, tokens = key_wake(queue), {}
  for i = 1, math.min(n, WAKE_MAX) do tokens[i] = '1' end
  if redis.call('LPUSH', wk, unpack(tokens)) > WAKE_MAX then redis.call('LTRIM', wk, 0, WAKE_MAX - 1) end
end
