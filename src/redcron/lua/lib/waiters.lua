--[[ waiters: wake result() callers (watch.lua registered them) once an
  instance is terminal. ]]

local function notify_done(ti, iid)
  local w = tonumber(redis.call('HGET', ti, 'waiters') or '0')
  if w > 0 then
    local dk = key_done(iid)
    local tokens = {}
    for i = 1, math.min(w, 64) do tokens[i] = '1' end
    redis.call('LPUSH', dk, unpack(tokens))
    redis.call('EXPIRE', dk, 60)
    redis.call('HSET', ti, 'waiters', '0')
  end
end
