--[[ followup: what only reacts to an end, written beside it (docs/architecture.md,
  "Follow-ups beside the hot path").  A script that ends attempts or runs, or
  fires, notes rows with follow(kind, row) while it works and writes them with
  follow_flush(now) before it returns: at most one entry per kind of the
  shard's followups stream, in the same call as the end (so atomically with
  it).  Maintenance applies them with scripts of their own, each entry once
  (the script that applies an entry deletes it in the same call):
    kind ends  (follow_ends.lua): fields attempts, left, dead, fires
    kind runs  (follow_runs.lua): field runs
    kind chain (follow_chain.lua): field chain
    kind cancel (follow_cancel.lua): field cancel
    kind map   (Maintenance.expand_map: map_expand.lua): field map
  Each field is a JSON array of rows (cjson, readable with redis-cli XRANGE);
  field at is the time of the end (ms), the time every follow-up applies at.
  Rows:
    attempts {iid, attempt, outcome, tenant, handed back 0|1, stats counter
              ('' or the one a retry counts under), task name, ms it took
              (from started, else leased; -1: not timed)}
    left     {iid, state}: a run's task ended without success other than by an
             attempt's verdict (a breaker trial's end is checked)
    dead     {iid, tenant, name, outcome, error (<= 300 characters)}
    fires    {tenant, job id, run id, lag ms}: a scheduled fire
    runs     {run id, state, tenant}: a run ended (state dlq_left: a dead task
             of an ended run left the DLQ for good)
    chain    {job id, state}: a run of the job ended; chaining and the buffered
             fire (overlap buffer_one) follow from it
    cancel   {run id}: a fire of an overlap cancel_previous job marked the run
             cancel_requested; its tasks are cancelled
    map      {iid}: a mapped task's dependencies succeeded (or its run began,
             for a map over a param): its instances are made (kind map,
             applied by Maintenance.expand_map, page by page: map_expand.lua) ]]

local FOLLOW = {attempts = {}, left = {}, dead = {}, fires = {}, runs = {}, chain = {},
  cancel = {}, map = {}}
local FOLLOW_KINDS = {ends = {'attempts', 'left', 'dead', 'fires'}, runs = {'runs'},
  chain = {'chain'}, cancel = {'cancel'}, map = {'map'}}

local function follow(field, row)
  local rows = FOLLOW[field]
  rows[#rows + 1] = row
end

local function follow_flush(now)
  for kind, names in pairs(FOLLOW_KINDS) do
    local fields = {}
    for _, name in ipairs(names) do
      if #FOLLOW[name] > 0 then
        fields[#fields + 1] = name
        fields[#fields + 1] = cjson.encode(FOLLOW[name])
        FOLLOW[name] = {}
      end
    end
    if #fields > 0 then
      redis.call('XADD', key_followups(), '*', 'kind', kind, 'at', now, unpack(fields))
    end
  end
end
