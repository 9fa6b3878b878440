--[[ enqueue_check: admit a batch that takes more than one enqueue call, before
  any of its calls writes, and reserve its room under max_queued.
  Enqueuer.enqueue queues these calls (ids 256 per call, the admission on the
  last one of each shard) before the batch's enqueue calls.
  KEYS[1] shard prefix (rc:{sN}:)
  KEYS[2] the batch key (lock:batch:<token>): the refusal marker, and the name of
          the batch's reservations
  ARGV[1] admission: JSON object tenant -> instances the whole batch makes ready
          at once on this shard (countdown tasks excluded); "" = not in this call
  ARGV[2] tenants with command or container rows anywhere in the batch on this
          shard, comma-separated ("" = none): each needs the grant allow_commands
  ARGV[3..] instance ids (<= 256 per call; the caller refuses ids that come
          twice in the batch)
  Returns: number of ids checked.
  Errors: CONFLICT if an id already exists; FORBIDDEN when a tenant of ARGV[2]
  lacks the grant (lib/grant.lua); QUOTA when a tenant would exceed
  its max_queued (the same test as enqueue.lua, for the whole batch, counting
  other batches' reservations); REJECTED when an earlier call of the batch
  refused.  On a refusal the refusal marker is set (PX 60000), so the batch's
  later calls refuse too and nothing of it is written or reserved.
  Writes: on success with an admission, a reservation per bounded tenant in
  reserved:<tenant> (<batch key> -> n, <batch key>:exp -> now + 60 s), which
  queued_count adds and the batch's enqueue calls use up as they write; the
  client releases it if the batch is refused elsewhere (another shard).
  Upholds: a refused submission writes nothing, and admitted work never
  takes a tenant past max_queued. ]]
-- @include lib/clock.lua
-- @include lib/admission.lua
-- @include lib/batch.lua
-- @include lib/grant.lua

local batch = KEYS[2]
local admitting = ARGV[1]  -- JSON tenant -> n, or ''
local needing = ARGV[2]  -- tenants that need the grant, comma-separated
local FIRST_ID = 3

local refused = batch_refused(batch)
if refused then return refused end
for tenant in string.gmatch(needing, '[^,]+') do
  if not granted(tenant) then
    return batch_refuse(batch, 'FORBIDDEN', grant_message(tenant, 'a task of the batch is a '
      .. 'command or container'))
  end
end
for i = FIRST_ID, #ARGV do
  local iid = ARGV[i]
  if redis.call('EXISTS', key_ti(iid)) == 1 then
    return batch_refuse(batch, 'CONFLICT', 'task id ' .. iid .. ' already exists')
  end
end
if admitting ~= '' then
  local reserve = {}
  for tenant, n in pairs(cjson.decode(admitting)) do
    local max_queued = admission(tenant)
    local over = over_quota(tenant, n, max_queued)
    if over then return batch_refuse(batch, 'QUOTA', over) end
    if max_queued > 0 and n > 0 then reserve[tenant] = n end
  end
  local exp = server_ms() + 60000
  for tenant, n in pairs(reserve) do
    redis.call('HSET', key_reserved(tenant), batch, n, batch .. ':exp', exp)
  end
end
return #ARGV - FIRST_ID + 1
