--[[ limits: a tenant's cap (valid leases: the size of leases:<t>) and rate
  (a token bucket on the server clock, kept in its tenant hash as tokens and
  tokens_ts) as lease.lua applies them.  A tenant with no room leaves the ring
  and the aging index (recorded in the field parked of tenant:<t>,
  lib/parked.lua) and comes back when a lease ends (unpark, lib/rings.lua) or
  its next token is due (a park:<t> timer). ]]
-- @include lib/parked.lua

-- A tenant's limits, read once per lease call (`cache`: tenant -> limits),
-- with its token bucket refilled to `now`.
local function tenant_limits(cache, tenant, now)
  local t = cache[tenant]
  if t then return t end
  local f = read_tenant_limits(key_tenant(tenant))
  t = {weight = tonumber(f[TENANT_LIMITS_WEIGHT] or '') or 1,
       cap = tonumber(f[TENANT_LIMITS_MAX_IN_FLIGHT] or '') or 0,
       rate = tonumber(f[TENANT_LIMITS_RATE] or '') or 0,
       burst = tonumber(f[TENANT_LIMITS_BURST] or '') or 0,
       tokens = tonumber(f[TENANT_LIMITS_TOKENS] or ''),
       ts = tonumber(f[TENANT_LIMITS_TOKENS_TS] or ''),
       commands = f[TENANT_LIMITS_ALLOW_COMMANDS] == '1'}
  if t.rate > 0 then
    if t.burst <= 0 then t.burst = math.max(1, math.ceil(t.rate)) end
    if t.tokens == nil or t.ts == nil then t.tokens, t.ts = t.burst, now end
    -- refill the bucket on server time
    t.tokens = math.min(t.burst, t.tokens + (now - t.ts) * t.rate / 1000)
    t.ts = now
  end
  cache[tenant] = t
  return t
end

-- How many of n more this tenant may start now (cap and rate); when none, it
-- is parked off (queue, priority): off the ring, the aging index and its visit.
local function tenant_room(t, tenant, queue, priority, ring, n, now)
  if t.cap > 0 then
    local free = t.cap - redis.call('ZCARD', key_leases(tenant))
    if free < n then n = free end
  end
  local rate_short = false
  if t.rate > 0 and t.tokens < n then
    n = math.floor(t.tokens)
    rate_short = n <= 0
  end
  if n <= 0 then
    redis.call('ZREM', ring, tenant)
    -- off the aging index too, or its old work would hide others' (lib/aging.lua)
    redis.call('ZREM', key_oldest(queue, priority), tenant)
    park_off(tenant, queue, priority)
    redis.call('HDEL', key_tenant(tenant), 'v:' .. queue .. ':' .. priority)
    if rate_short then
      local wait = math.ceil((1 - t.tokens) * 1000 / t.rate)
      redis.call('ZADD', key_timers(), now + math.max(1, wait), 'park:' .. tenant)
    end
    return 0
  end
  return n
end

-- Persist the token buckets a lease call spent from (`cache` of tenant_limits).
local function limits_save(cache)
  for tenant, t in pairs(cache) do
    if t.rate > 0 then
      redis.call('HSET', key_tenant(tenant), 'tokens', t.tokens, 'tokens_ts', t.ts)
    end
  end
end
