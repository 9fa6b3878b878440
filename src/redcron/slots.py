"""What moving a Redis Cluster slot takes, shared by the broker (``redcron
cluster move-shard``, ``engine/cluster_admin.py``) and the local cluster of the
tests (``EmbeddedCluster.move_slot``): a leaf, so both may import it."""

from __future__ import annotations

#: moves every key of a slot in one script call on its master: nothing runs on
#: that master between the first key moved and the last (see move_slot)
#: ARGV: slot, target host, target port, target node id, keys per MIGRATE, timeout ms
#: returns: how many keys moved
MOVE_SLOT_LUA = """
local slot, host, port, target, batch, timeout = unpack(ARGV)
-- ARGV[7..]: MIGRATE's AUTH password, or AUTH2 username password (the target's)
local head = {host, port, '', 0, timeout}
for i = 7, #ARGV do head[#head + 1] = ARGV[i] end
head[#head + 1] = 'KEYS'
redis.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', target)
local moved = 0
while true do
  local keys = redis.call('CLUSTER', 'GETKEYSINSLOT', slot, batch)
  if #keys == 0 then return moved end
  local call = {unpack(head)}
  for _, key in ipairs(keys) do call[#call + 1] = key end
  redis.call('MIGRATE', unpack(call))
  moved = moved + #keys
end
"""
