--[[ token: the one check of a lease token (worker, epoch) against the instance
  hash it names.  `f` is any generated read (model/fields.py) that carries
  state, worker and epoch.  Every assignment increments the epoch, so a token
  matches only the current attempt; a stale token must write nothing, so the
  callers check before their first write. ]]

-- Does the token name the current attempt, in one of `states` (a set; default
-- TASK_LEASED: a valid lease, leased or running)?
local function token_holds(f, worker, epoch, states)
  return (states or TASK_LEASED)[f.state] == true and f.worker == worker and f.epoch == epoch
end
