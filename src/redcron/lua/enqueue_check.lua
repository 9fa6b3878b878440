--[[ enqueue_check: admit a batch that takes more than one enqueue call, before
  any of its calls writes.  Broker.enqueue queues these checks and then the
  batch's enqueue calls in one MULTI/EXEC, so nothing interleaves between the
  checks and the writes.
  KEYS[1] shard prefix (rc:{sN}:)
  KEYS[2] the batch's refusal key (batch:<token>), also passed to its enqueue calls
  ARGV[1] admission: JSON object tenant -> instances the whole batch makes ready
          at once on this shard (countdown tasks excluded); "" = not checked
          here (exactly one check call per shard of a batch carries it)
  ARGV[2..] instance ids (<= 256 per call; the caller refuses ids that come
          twice in the batch)
  Returns: number of ids checked.
  Errors: CONFLICT if an id already exists; QUOTA when a tenant would exceed
  its max_queued (the same test as enqueue.lua, for the whole batch).  On a
  refusal the refusal key is set (PX 60000): every enqueue call of the batch
  after it refuses too, so the batch writes nothing.  Writes nothing else.
  Upholds: a refused submission writes nothing (DESIGN §6 admission control). ]]
-- @include lib/common.lua

local refusal = KEYS[2]

local function refuse(code, msg)
  redis.call('SET', refusal, code, 'PX', 60000)
  return err(code, msg)
end

for i = 2, #ARGV do
  if redis.call('EXISTS', key_ti(ARGV[i])) == 1 then
    return refuse('CONFLICT', 'task id ' .. ARGV[i] .. ' already exists')
  end
end
if ARGV[1] ~= '' then
  for tenant, n in pairs(cjson.decode(ARGV[1])) do
    local max_queued = admission(tenant)
    if max_queued > 0 and n > 0 then
      local queued = queued_count(tenant)
      if queued + n > max_queued then
        return refuse('QUOTA', 'tenant ' .. tenant .. ' has ' .. queued .. ' queued; ' .. n
          .. ' more would exceed its max_queued of ' .. max_queued)
      end
    end
  end
end
return #ARGV - 1
