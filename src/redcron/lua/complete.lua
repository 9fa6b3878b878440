--[[ complete: record successful attempts, batched.
  KEYS[1] shard prefix
  ARGV[1] worker_id
  ARGV[2] now_override_ms ("" = server TIME)
  ARGV[3..] triples: iid, epoch, result (msgpack)
  Returns: one entry per triple: 1 = recorded, 0 = lease lost (nothing written).
  Upholds: invariants 3 (a stale token writes nothing), 5 (one end per attempt). ]]
-- @include lib/common.lua

local worker = ARGV[1]
local now = now_ms(ARGV[2])
local out = {}
for i = 3, #ARGV, 3 do
  local iid, epoch = ARGV[i], ARGV[i + 1]
  local ti = key_ti(iid)
  if token_ok(ti, worker, epoch) then
    redis.call('HSET', ti, 'result', ARGV[i + 2])
    end_attempt(ti, iid, 'succeeded', '', '0', '', '', now, 0)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
