--[[ batch: a batch of more than one enqueue call has a batch key (KEYS[2],
  lock:batch:<token>): the first call that refuses sets it, and every later call
  of the batch then refuses too, so nothing of a refused batch is written. ]]
-- @include lib/err.lua

local function batch_refuse(batch, code, msg)
  if batch then redis.call('SET', batch, code, 'PX', 60000) end
  return err(code, msg)
end

local function batch_refused(batch)
  if batch and redis.call('EXISTS', batch) == 1 then
    return err('REJECTED', 'an earlier call of this batch was refused; nothing written')
  end
end
