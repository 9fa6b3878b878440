--[[ token: the one check of a lease token (worker, epoch) against the instance
  hash it names.  `f` is the reply of a generated read (model/fields.py)
  that starts with state, worker, epoch (TOKEN_READS there, checked when the
  Lua is generated).  Every assignment increments the epoch, so a token
  matches only the current attempt; a stale token must write nothing, so the
  callers check before their first write. ]]

-- Does the token name the current attempt, in one of `states` (a set; default
-- TASK_LEASED: a valid lease, leased or running)?
local function token_holds(f, worker, epoch, states)
  return (states or TASK_LEASED)[f[TOKEN_STATE]] == true and f[TOKEN_WORKER] == worker
    and f[TOKEN_EPOCH] == epoch
end
