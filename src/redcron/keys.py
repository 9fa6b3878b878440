"""Every Redis key name redcron uses is built here, and only here, with the
ids that route to them (:func:`shard_of_id`) and the run ids derived from a
fire (:func:`run_id`, :func:`job_of_run`).

Keys that belong to a shard carry the hash tag ``{s<N>}`` so that every
script touches one cluster slot.  Lua scripts get a shard's prefix as
``KEYS[1]`` and build the rest with functions generated from the same
templates (:func:`lua_key_functions`), so Python and Lua cannot drift; the
run id's builder and parser are generated for Lua the same way.

One module, a little over 400 lines, on purpose: it is the single place key
names are built (CONVENTIONS.md), and the generated Lua must see every template
at once.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from redcron.errors import NotFound

#: kind -> template relative to the shard prefix.  Placeholders are filled
#: in order by both the Python and the generated Lua builders.
TEMPLATES: dict[str, tuple[str, tuple[str, ...]]] = {
    # instance hash: state, location, attempt, epoch, worker, deadline, history
    "ti": ("ti:{iid}", ("iid",)),
    # instances of one tenant in one queue and priority class: undelivered
    # entries are ready, entries pending in the consumer group are leased
    "q": ("q:{queue}:{tenant}:{priority}", ("queue", "tenant", "priority")),
    # tenants with ready work in (queue, class), scored by rotation order
    "ring": ("ring:{queue}:{priority}", ("queue", "priority")),
    # ready streams with pending (leased) entries -> when the reaper next looks (ms)
    "pending": ("pending", ()),
    # the shard's maintenance bookkeeping (HASH): reap_cursor:<stream> (XAUTOCLAIM
    # cursor of a reaper pass cut short by its bound), reap_ttl:<stream> (the
    # shortest lease TTL in ms granted on it while it has had pending entries: the
    # reaper's min-idle for it), recent_cursor (rank in ``recent`` where
    # maintenance next looks for expired ids), index_version (the version the
    # listing indexes were backfilled to); and the shard's beat ownership lease,
    # MAINT_BEAT_* below: beat_owner, beat_epoch (fencing), beat_expiry (ms),
    # beat_since (a HASH beat before layout 4)
    "maintenance": ("maintenance", ()),
    # one tenant's valid leases, scored by deadline (in-flight = ZCARD)
    "leases": ("leases:{tenant}", ("tenant",)),
    # due time -> retries and countdown (ETA) tasks
    "timers": ("timers", ()),
    # dead-lettered instances of one tenant
    "dlq": ("dlq:{tenant}", ("tenant",)),
    # tenants whose DLQ may hold entries, all scored 0 (paged by ZRANGEBYLEX:
    # the cross-tenant DLQ list reads a page of it, never every tenant)
    "dlqidx": ("dlqidx", ()),
    # wake-up tokens for idle workers of one queue
    "wake": ("wake:{queue}", ("queue",)),
    # captured output of one attempt (capped)
    "log": ("log:{iid}:{attempt}", ("iid", "attempt")),
    # tokens for result() waiters
    "done": ("done:{iid}", ("iid",)),
    # tenants known on this shard, all scored 0 (read in name order by
    # ZRANGEBYLEX: the faces page over it; membership is ZSCORE)
    "tenants": ("tenants", ()),
    # jobs of this shard as "<tenant> <name> <job id>", all scored 0: paged by
    # ZRANGEBYLEX, and the upsert key: a (tenant, name) lookup is one
    # ZRANGEBYLEX on the "<tenant> <name> " prefix (jobidx_range)
    "jobidx": ("jobidx", ()),
    # run id -> created (ms): the shard's newest runs, for /v1/runs (trimmed)
    "runidx": ("runidx", ()),
    # one tenant's run ids -> created (ms), for /v1/runs of a tenant (trimmed)
    "truns": ("truns:{tenant}", ("tenant",)),
    # queues known on this shard -> SET of names
    "queues": ("queues", ()),
    # the shard's lifetime counters (HASH), one field each, named by what they
    # count (COUNTER_* below): attempts:<tenant>|<outcome>, attempts:*|<outcome>
    # (summed over tenants), runs:<tenant>|<state>, runs:*|<state>, lag:<le>,
    # lag:sum_ms, lag:count (trigger lag of scheduled fires), late:<tenant>,
    # late:*, and the shard's STAT_FIELDS (fires, retries, dead, lease_expired...)
    "counters": ("counters", ()),
    # short maintenance locks (promote/reap at most once per interval)
    "lock": ("lock:{name}", ("name",)),
    # one-off instance id -> created (ms): the newest one-off instances, for `task
    # list`, which reads a run's tasks through runidx (enqueue adds, trimmed to the
    # newest 100,000 per shard)
    "recent": ("recent", ()),
    # a job: spec, trigger, version, policies, compiled DAG template
    "job": ("job:{job_id}", ("job_id",)),
    # job id -> next due time (ms); only fire, job update, pause, park and delete change it
    "schedule": ("schedule", ()),
    # jobs, and work, that wait on an operator or a breaker, all scored 0, by kind
    # (ATTENTION_* below): breaker:<job id> (its circuit breaker is open or in
    # trial), parked:<job id> (the beat parked it: off the schedule, it could not
    # plan or fire it), held:<instance id> (a run's task held aside while its
    # job's breaker is open: the place of an instance in state held; a job's are
    # the members after held:<job id>@, its run ids' prefix).  Each reader reads
    # one kind (ZRANGEBYLEX over its prefix, ZLEXCOUNT), never every job
    "attention": ("attention", ()),
    # a run: state, scheduled_for, trigger, counters, task names
    "run": ("run:{run_id}", ("run_id",)),
    # a job's run history: run id -> scheduled_for (ms)
    "runs": ("runs:{job_id}", ("job_id",)),
    # a job's runs that have not ended
    "active": ("active:{job_id}", ("job_id",)),
    # a tenant's settings (weight, max_in_flight, rate, burst, max_queued,
    # max_priority, jitter_s, allow_commands) and dispatch state (d:<queue>:<class> deficits,
    # v:<queue>:<class> visit in progress, tokens, tokens_ts, parked: comma list of
    # the <queue>|<class> rings it left at its cap or rate limit, lib/parked.lua)
    "tenant": ("tenant:{tenant}", ("tenant",)),
    # tenant -> oldest ready entry time (ms) per (queue, class): aging without a scan
    "oldest": ("oldest:{queue}:{priority}", ("queue", "priority")),
    # concurrency keys (a task's concurrency_key / max_concurrent): the slots of
    # one key value of one tenant's task -> instance id -> lease deadline (or the
    # time a waiter was woken into the slot it reserves); at most the task's N
    "ckslots": ("ckslots:{tenant}:{name}:{ck}", ("tenant", "name", "ck")),
    # the instances waiting for a slot of that key value, oldest first (LIST)
    "ckwaiting": ("ckwaiting:{tenant}:{name}:{ck}", ("tenant", "name", "ck")),
    # rate limits (a task's rate / rate_key, lua/lib/rate.lua): one group's releases
    # of the last unit (<iid>@<ms> -> ms) and its next turn (member next)
    "rate": ("rate:{tenant}:{name}:{group}", ("tenant", "name", "group")),
    # deadlines of runs not ended: run id -> nominal fire ms + the job's deadline_ms
    # (run creation adds, run end removes, deadline_sweep.lua pops what is due)
    "deadlines": ("deadlines", ()),
    # what reacts to ends of attempts and runs and to fires (counters, histograms,
    # breaker, events, chaining, retention), written beside the end in the same
    # call and applied by maintenance (lua/lib/followup.lua): entries of kind ends,
    # runs or chain; never trimmed, each entry deleted by the script that applies it
    "followups": ("followups", ()),
    # recorded events (breaker_opened/closed/reopened/trial, dead_lettered, run_failed,
    # trigger_lag, run_late): type, tenant, job, run, at, detail; the notifier reads
    # it through the consumer group NOTIFY_GROUP.  Capped at EVENTS_MAX (MAXLEN ~)
    # and trimmed by age (EVENTS_RETENTION_MS, MINID ~) by the notifier
    "events": ("events", ()),
    # ready instances admitted multi-call batches still have to write, which
    # max_queued counts: <batch key> -> count, <batch key>:exp -> expiry (ms)
    "reserved": ("reserved:{tenant}", ("tenant",)),
    # the figures of one minute (HASH; <minute> = ms // 60000, server clock), one
    # field each, named by what they count (MINUTE_* below): attempts:<tenant>|succeeded,
    # attempts:<tenant>|failed (failed, timed out or lost) -> attempts ended in the
    # minute; lag:<tenant>|<le> -> scheduled fires in that trigger-lag bucket;
    # dispatched:<tenant> -> tasks leased (share of dispatch); <tenant> * is every
    # tenant's sum.  Expires after ACTIVITY_TTL_S, the longest any reader needs
    # (the dashboard's last hour; the dispatch share reads only 2 minutes)
    "minute": ("minute:{minute}", ("minute",)),
    # lifetime duration histograms of a tenant: task:<task name>|<le> -> attempts
    # (bucket counts, not cumulative), task:<task name>|sum_ms, task:#names (names
    # held, at most DURATION_NAMES; later names count as DURATION_OTHER); the same
    # for its runs per job name under job:
    "durations": ("durations:{tenant}", ("tenant",)),
    # -- unique windows, debounce and ctx.once (issue 21 §4; lib/dedupe.lua) ----
    # a dedupe key's task: STRING -> instance id.  <mode> ``unique``: the holder
    # of a unique window, PX = the window; ``debounce``: a debounce key's open
    # group, PX = until its start.  <digest> = sha1 of the task name and its key
    # (model/dedupe.py); the two modes can give one digest for one _unique_key,
    # so the mode is in the name.  ``once``: a ctx.once() effect record (SET NX
    # EX), <digest> = "<idem_key>:<key>" as the task gave it (engine/leases.py)
    "dedupe": ("dedupe:{tenant}:{mode}:{digest}", ("tenant", "mode", "digest")),
    # -- end unique windows and debounce ---------------------------------------
    # opt-in attempt audit (``Worker(audit=True)``, ``redcron chaos``): one entry per
    # attempt start and end; the entry id is the server time; capped (MAXLEN ~)
    "audit": ("audit", ()),
    # who did what (issue 21 §5; not the attempt audit above): one entry per
    # state-changing action on one tenant through the API, the pages or the CLI;
    # bounded by store/actions.py's MAXLEN and MINID (age)
    "actions": ("actions:{tenant}", ("tenant",)),
}

#: kinds an older release wrote and this one does not: only the one-time upgrade
#: of a deployment (engine/upgrade.py) reads them, moves what they held into the
#: kinds above, and deletes them (docs/keys.md "Retired kinds")
RETIRED: dict[str, str] = {
    # merged into ``tenants`` (a SET then, a ZSET now)
    "tenantidx": "tenantidx",
    # fields of ``maintenance`` now: reap_cursor:<stream>, reap_ttl:<stream>,
    # recent_cursor, index_version
    "reapcur": "reapcur",
    "reapttl": "reapttl",
    "recentcur": "recentcur",
    "indexed": "indexed",
    # ``dedupe:<tenant>:unique:<digest>`` and ``dedupe:<tenant>:debounce:<digest>``
    # now (the retired keys carry ``:<tenant>:<digest>`` after these)
    "uniq": "uniq",
    "debounce": "debounce",
    # the field ``parked`` of ``tenant:<tenant>`` now (a SET ``parked:<tenant>``)
    "parked": "parked",
    # renamed to be read (``leases``, ``ckslots``, ``ckwaiting``), ids kept
    "tleases": "tleases",
    "cks": "cks",
    "ckq": "ckq",
    # fields of ``counters`` now (layout 3): stats fields as they were, and
    # attempts:, runs:, lag:, late: before the old fields
    "stats": "stats",
    "attempts": "attempts",
    "attemptsall": "attemptsall",
    "runends": "runends",
    "runendsall": "runendsall",
    "lag": "lag",
    "late": "late",
    # the field lag_alert_at of job:<job id> now (layout 3); the STRINGs expire
    # within EVENT_LAG_EVERY_MS, so the upgrade leaves them to expire
    "lagalert": "lagalert",
    # ``durations:<tenant>`` now (layout 3), fields under task: and job:
    "adur": "adur",
    "rdur": "rdur",
    # fields of ``minute:<minute>`` now (layout 4): attempts:, lag:, dispatched:
    # before the old fields; per-minute figures, carried by the upgrade for the
    # minutes they live (no SCAN: the minutes are known)
    "act": "act",
    "lagm": "lagm",
    "disp": "disp",
    # the field breaker_minutes of job:<job id> now (layout 4); the HASHes expire
    # breaker_window_s + 2 min after the job's last attempt, so the upgrade leaves
    # them to expire
    "brk": "brk",
    # members of ``attention`` now (layout 4), breaker:<job id> and parked:<job id>
    # (all scored 0: the cool-down's end and the parking time are the job hash's
    # breaker_until and parked_at)
    "brkopen": "brkopen",
    "jobparked": "jobparked",
    # members held:<instance id> of ``attention`` now (layout 4; a job's LIST
    # held:<job id> then): carried, or its held work would never be released
    "held": "held",
    # the field chain_ok of job:<job id> now (layout 4; a SET of upstream names
    # then, a comma list now)
    "chainok": "chainok",
    # the field chain_down of the upstream's job:<job id> now (layout 4; a SET of
    # the names of the jobs naming <name> in depends_on then, a comma list now)
    "chaindown": "chaindown",
    # ``dedupe:<tenant>:once:<idem_key>:<key>`` now (layout 4), tenant-scoped
    "once": "once",
    # members "<tenant> <name> <job id>" of ``jobidx`` now (layout 4; a HASH name
    # -> job id per tenant, beside jobidx members "<tenant> <name>")
    "jobs": "jobs",
    # fields beat_owner, beat_epoch, beat_expiry, beat_since of ``maintenance``
    # now (layout 4; a HASH owner, epoch, expiry, since then): carried, the epoch
    # never lowered, so a fence a beat of the old layout held stays valid
    "beat": "beat",
}
#: the key layout this release writes: ``layout`` in the meta HASH, raised by the
#: upgrade (engine/upgrade.py) once a deployment's shards are brought to it
LAYOUT = 5
#: the hash tag of every deployment-wide key (layout 5): one slot for them all
DEPLOYMENT_TAG = "{g}"
#: the deployment-wide keys of one name (the rest are ``<kind>:<id>``, :data:`DEPLOYMENT_KINDS`)
DEPLOYMENT_NAMES = (
    "meta", "beats", "workers", "workeridx", "tokens", "actions", "session_secret",
    "lease_secret", "channel_secret", "channels",
)  # fmt: skip
#: the deployment-wide kinds of many keys, ``<kind>:<id>``
DEPLOYMENT_KINDS = ("worker", "token", "login")

#: prefix of a timers member that is no instance: a concurrency key whose waiters
#: promote wakes into its free slots, ``ckwake:<json [tenant, name, ck, cap]>``
#: (lib/ck_admit.lua; lease.lua leaves the waking to promote)
TIMER_CKWAKE = "ckwake:"
#: timers members that are no instance id: rate-limited tenants, breaker
#: cool-downs, concurrency-key wake-ups
TIMER_NON_INSTANCE = ("park:", "brk:", TIMER_CKWAKE)

#: the field of a tenant's hash that lists the rings it is parked off
#: (``<queue>|<class>``, comma-separated; lib/parked.lua)
TENANT_PARKED = "parked"
#: fields of a shard's ``maintenance`` HASH (Lua gets the two prefixes generated)
MAINT_REAP_CURSOR = "reap_cursor:"  # + stream key
MAINT_REAP_TTL = "reap_ttl:"  # + stream key
MAINT_RECENT_CURSOR = "recent_cursor"
#: + ``<stream key>:<entry id>`` -> when (ms, server clock) a ready-stream entry was
#: first seen naming an instance whose hash is missing (a half-finished cluster
#: slot migration looks so): lib/take.lua leaves such an entry pending, reap.lua
#: puts it back to ready once the hash is back, and it is deleted (reap, doctor)
#: only once the hash has been missing STRAY_MAX_MS
MAINT_STRAY = "stray:"
#: how long an instance hash may be missing before its entry is deleted (a day)
STRAY_MAX_MS = 86_400_000
MAINT_INDEX_VERSION = "index_version"
#: the shard's beat ownership lease (beat_own.lua; fire.lua checks the epoch):
#: the owning beat's id ("" = none), the fencing epoch (+1 per new owner), the
#: lease's expiry and since when it is held (ms, server clock)
MAINT_BEAT_OWNER = "beat_owner"
MAINT_BEAT_EPOCH = "beat_epoch"
MAINT_BEAT_EXPIRY = "beat_expiry"
MAINT_BEAT_SINCE = "beat_since"

#: the prefixes of a shard's ``counters`` fields (Lua gets them generated, as
#: ``COUNTERS.attempts`` ...); the tenant ``*`` is every tenant's sum (no tenant
#: is named ``*``)
COUNTER_ATTEMPTS = "attempts:"  # + <tenant>|<outcome>
COUNTER_RUNS = "runs:"  # + <tenant>|<state>
COUNTER_LAG = "lag:"  # + <le>, sum_ms, count
COUNTER_LATE = "late:"  # + <tenant>
#: the ``counters`` fields without a prefix: what the scripts count per shard
#: (read by name, never by HGETALL: the hash also holds every tenant's fields)
STAT_FIELDS: tuple[str, ...] = (
    "fires", "fires_chained", "fires_skipped", "fires_rejected", "fires_overlap_skipped",
    "retries", "handed_back", "lease_expired", "dead", "rate_waits",
)  # fmt: skip

#: upper bounds (seconds) of the trigger-lag histogram's finite buckets; one more
#: bucket, ``+Inf``, takes the rest.  Lua gets them generated (``LAG_BUCKETS``).
LAG_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
)  # fmt: skip
#: upper bounds (seconds) of the attempt- and run-duration histograms' finite
#: buckets (``+Inf`` takes the rest); Lua gets them generated (``DURATION_BUCKETS``)
DURATION_BUCKETS_S: tuple[float, ...] = (
    0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 300, 900, 3600,
)  # fmt: skip
#: the prefixes of a tenant's ``durations`` fields: its attempts per task name,
#: its runs per job name (Lua gets them generated, as ``DURATIONS.task`` ...)
DURATIONS_TASK = "task:"
DURATIONS_JOB = "job:"
#: task (job) names a tenant's duration histogram holds (each kind of name); later names count as
#: DURATION_OTHER, so a tenant's series stay bounded whatever its tasks are named
DURATION_NAMES = 20
#: the name the names past DURATION_NAMES count under (no task or job name has
#: parentheses)
DURATION_OTHER = "(other)"
#: the prefixes of a ``minute:<minute>`` hash's fields (Lua gets them generated, as
#: ``MINUTE.attempts`` ...); the tenant ``*`` is every tenant's sum
MINUTE_ATTEMPTS = "attempts:"  # + <tenant>|succeeded, <tenant>|failed
MINUTE_LAG = "lag:"  # + <tenant>|<le>
MINUTE_DISPATCHED = "dispatched:"  # + <tenant>
#: the member prefixes of a shard's ``attention`` ZSET (Lua gets them generated, as
#: ``ATTENTION.breaker`` ...): a job whose breaker is open or in trial, a job the
#: beat parked, an instance held aside by its job's open breaker
ATTENTION_BREAKER = "breaker:"  # + <job id>
ATTENTION_PARKED = "parked:"  # + <job id>
ATTENTION_HELD = "held:"  # + <instance id> (``<job id>@<fire>/<task>``)


def held_prefix(job_id: str) -> str:
    """The prefix of the ``attention`` members of ``job_id``'s held instances
    (``held:<job id>@``: its run ids start so, and no job id holds ``@``)."""
    return ATTENTION_HELD + job_id + RUN_SEP


def prefix_range(prefix: str) -> tuple[str, str]:
    """``(min, max)`` for ``ZRANGEBYLEX``/``ZLEXCOUNT`` over the members that
    start with ``prefix`` (of a ZSET all scored 0)."""
    return "[" + prefix, "(" + prefix[:-1] + chr(ord(prefix[-1]) + 1)


def glob_escape(text: str) -> str:
    """``text`` matched literally by a SCAN MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


#: how long a per-minute figure (``minute:<minute>``) lives: the dashboard reads the
#: last hour, with room for a clock step and a slow reader.  One TTL for the whole
#: hash, so the longest its readers need: the dispatch shares (``dispatched:``)
#: are read for 2 minutes only, and live as long as the rest
ACTIVITY_TTL_S = 7200
#: the longest a wake list (``wake:<queue>``) gets: lib/rings.lua's wake() and the
#: worker protocol's hand-on trim to it
WAKE_MAX = 16
#: runs kept in a shard's ``runidx`` and a tenant's ``truns`` (newest first; older
#: runs are still read by job, from the job's own history)
RUNIDX_MAX = 100_000
TRUNS_MAX = 10_000
#: events kept per shard (``events``; XADD MAXLEN ~): a bound on memory whatever
#: fails; the notifier also trims entries older than EVENTS_RETENTION_MS
EVENTS_MAX = 100_000
#: how long an event waits for the notifier (7 days): its stated retention
EVENTS_RETENTION_MS = 7 * 86_400_000
#: a scheduled fire this late (ms) records a ``trigger_lag`` event ...
EVENT_LAG_MS = 30_000
#: ... at most once per job per this interval (ms), so a stalled shard cannot flood
EVENT_LAG_EVERY_MS = 300_000
#: the consumer group of every shard's events stream (the notifier's)
NOTIFY_GROUP = "notify"
#: a channel's keys under its prefix (``Keys.channel_prefix``); the notify_*
#: scripts get them generated as ``chan_<kind>()``
CHANNEL_KINDS = ("channel", "outbox", "outmsg", "digest", "dlog")
#: lines kept in a channel's delivery log (MAXLEN ~)
DLOG_MAX = 200
#: separator of a ``jobidx`` member ``<tenant> <name> <job id>``: no tenant, name
#: or job id holds a space, and it sorts below every character they may hold, so
#: the index's order is (tenant, name)'s and one (tenant, name) is one range
JOBIDX_SEP = " "


def jobidx_member(tenant: str, name: str, job_id: str) -> str:
    """A job's member of ``jobidx``: ``<tenant> <name> <job id>``."""
    return f"{tenant}{JOBIDX_SEP}{name}{JOBIDX_SEP}{job_id}"


def jobidx_range(tenant: str, name: str | None = None) -> tuple[str, str]:
    """ZRANGEBYLEX bounds of the ``jobidx`` members of ``tenant``'s job ``name``
    (at most one), or of all of ``tenant``'s jobs: from the prefix (inclusive) to
    the prefix with its last separator raised by one (exclusive), which sorts
    below every longer name (a name's characters all sort above it).  Lua's
    generated ``job_lookup`` reads the same range."""
    head = f"{tenant}{JOBIDX_SEP}" if name is None else f"{tenant}{JOBIDX_SEP}{name}{JOBIDX_SEP}"
    return f"[{head}", f"({head[:-1]}{chr(ord(JOBIDX_SEP) + 1)}"


def jobidx_parse(member: str) -> tuple[str, str, str] | None:
    """(tenant, name, job id) of a ``jobidx`` member; None for one of another
    shape (an older release's ``<tenant> <name>``: never written since layout 4)."""
    parts = member.split(JOBIDX_SEP)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def lag_bucket_label(bound_s: float) -> str:
    """A lag bucket's name, as a hash field and as Prometheus's ``le``: ``0.025``,
    ``1``, ``300``; ``+Inf`` for infinity."""
    return "+Inf" if bound_s == float("inf") else f"{bound_s:g}"


def lag_bucket_labels() -> tuple[str, ...]:
    """Every lag bucket's name in order, ``+Inf`` last."""
    return (*map(lag_bucket_label, LAG_BUCKETS_S), "+Inf")


def duration_bucket_labels() -> tuple[str, ...]:
    """Every duration bucket's name in order (``le``, as lag's), ``+Inf`` last."""
    return (*map(lag_bucket_label, DURATION_BUCKETS_S), "+Inf")


PRIORITIES: tuple[str, ...] = ("high", "normal", "low")

#: the one consumer group of every ready stream, and its one consumer: who
#: holds a lease is recorded in the instance hash (worker, epoch, deadline),
#: so consumers never pile up in the group
GROUP = "redcron"
CONSUMER = "redcron"


def shard_of(tenant: str, shards: int) -> int:
    """The shard a tenant lives on: ``crc32(tenant) % shards``."""
    return zlib.crc32(tenant.encode()) % shards


def q_tenant(keys: Keys, shard: int, key: str) -> str | None:
    """The tenant a ready stream's key (:meth:`Keys.q`) names; None for any other
    key (names hold no ``:``, so the parts split cleanly)."""
    head = keys.shard(shard) + "q:"
    parts = key[len(head) :].split(":") if key.startswith(head) else []
    return parts[1] if len(parts) == 3 else None


def shard_of_id(iid: str) -> int:
    """The shard an id was created on (ids are ``<shard>-<ulid>``)."""
    head, sep, _ = iid.partition("-")
    # isascii: str.isdigit() takes "²", which int() then refuses (a 500 from the API)
    if not sep or not (head.isascii() and head.isdigit()):
        raise NotFound(f"malformed task id {iid!r}: expected '<shard>-<ulid>'")
    return int(head)


#: between a run id's job id and its fire (``<job id>@<fire ms>``); job ids never hold it
RUN_SEP = "@"


def run_id(job_id: str, fire_ms: int) -> str:
    """The id of the run of ``job_id``'s fire at ``fire_ms`` (nominal, UTC ms):
    derived, so one fire time makes at most one run (invariant 1).  Lua builds
    the same with the generated ``make_run_id``."""
    return f"{job_id}{RUN_SEP}{fire_ms}"


def manual_run_id(job_id: str, token: str) -> str:
    """The id of a manual run of ``job_id`` (``<job id>@m<token>``, a fresh ulid):
    never a fire time, so it cannot collide with a scheduled run."""
    return f"{job_id}{RUN_SEP}m{token}"


#: between a run's id and a task's name in the id of the run's instance of that
#: task (``<run id>/<task>``); neither a one-off id nor a task name holds it
TASK_SEP = "/"


def run_of_task(iid: str) -> tuple[str, str] | None:
    """(run id, task name) of a run's instance id ``<run id>/<task>``; None for a
    one-off instance.  The instance hash does not repeat them (issue 19 §4).
    Lua's generated ``run_of_task`` returns nil for a one-off."""
    run, sep, task = iid.rpartition(TASK_SEP)
    return (run, task) if sep else None


def map_index(task: str) -> int | None:
    """The index an instance of a mapped task has in its name (``transform[3]``:
    3; issue 32 §2); None for any other task name."""
    head, sep, tail = task.rpartition("[")
    index = tail[:-1]
    return int(index) if sep and head and tail.endswith("]") and index.isdigit() else None


def job_of_run(run_id: str) -> str:
    """The job id a run id starts with (the text before its first ``@``; all of
    it when there is none).  Lua's generated ``job_of_run`` returns nil then."""
    return run_id.partition(RUN_SEP)[0]


@dataclass(frozen=True)
class Keys:
    """Key builder for one deployment prefix (default ``rc``)."""

    prefix: str = "rc"

    def deployment(self, name: str) -> str:
        """A deployment-wide key: every one carries the hash tag
        :data:`DEPLOYMENT_TAG`, so on a Redis Cluster they all live in one slot
        (one master: a master down elsewhere takes none of them along, and the
        meta, the registries, tokens and logins answer together or not at all)."""
        return f"{self.prefix}:{DEPLOYMENT_TAG}:{name}"

    def legacy_deployment(self, name: str) -> str:
        """Where layouts before 5 kept the deployment-wide key ``name`` (no hash
        tag: spread over the masters by its name), for the upgrade only."""
        return f"{self.prefix}:{name}"

    def meta(self) -> str:
        """Deployment metadata HASH (shards, lease TTL default and minimum)."""
        return self.deployment("meta")

    def beats(self) -> str:
        """Live beats ZSET: beat id -> registration expiry (ms, server clock)."""
        return self.deployment("beats")

    def workers(self) -> str:
        """Live workers ZSET: worker id -> registration expiry (ms, server clock)."""
        return self.deployment("workers")

    def workeridx(self) -> str:
        """Registered worker ids, all scored 0: the Workers page and ``GET
        /v1/workers`` page over it by id (``ZRANGEBYLEX``)."""
        return self.deployment("workeridx")

    def worker(self, worker_id: str) -> str:
        """One worker's registration HASH (expires unless heartbeats renew it)."""
        return self.deployment(f"worker:{worker_id}")

    def tokens(self) -> str:
        """API token index ZSET: token id -> created (ms); secrets are never stored."""
        return self.deployment("tokens")

    def token(self, token_id: str) -> str:
        """One API token's HASH: kind, tenant or queues/tenants, created, SHA-256 of the secret."""
        return self.deployment(f"token:{token_id}")

    def actions_all(self) -> str:
        """Every recorded action of the deployment STREAM (the admin's Audit view;
        actions on no tenant land only here); each tenant's are also in
        :meth:`actions`."""
        return self.deployment("actions")

    def login(self, code: str) -> str:
        """A one-time login link's STRING (``admin``), named by the SHA-256 of its code."""
        return self.deployment(f"login:{code}")

    def session_secret(self) -> str:
        """The dashboard's session-signing secret STRING (made once, shared by every replica)."""
        return self.deployment("session_secret")

    def lease_secret(self) -> str:
        """The HMAC key STRING that signs HTTP worker lease ids (made once, shared)."""
        return self.deployment("lease_secret")

    def channel_secret(self) -> str:
        """The master key STRING that channel secrets and URLs are encrypted under
        (made once, shared; store/channels.py derives its keys from it)."""
        return self.deployment("channel_secret")

    def channels(self) -> str:
        """Notification channels HASH: channel id -> owner (a tenant, or ``*`` for
        the admin's); the notifier and the listings read it."""
        return self.deployment("channels")

    def channel_prefix(self, channel_id: str) -> str:
        """The prefix of one channel's keys, each under the channel's own hash tag
        ``{c<id>}``: passed to the notify_* scripts as ``KEYS[1]``; ends with ``:``."""
        return f"{self.prefix}:{{c{channel_id}}}:"

    def channel(self, channel_id: str) -> str:
        """One channel's HASH: kind, owner, name, events, host, url and secret
        (encrypted), timeout_s, created, last_digest (ms)."""
        return self.channel_prefix(channel_id) + "channel"

    def outbox(self, channel_id: str) -> str:
        """A channel's pending deliveries ZSET: delivery id -> when it is next due
        (ms; a delivery being sent is pushed out by its claim)."""
        return self.channel_prefix(channel_id) + "outbox"

    def outmsg(self, channel_id: str) -> str:
        """A channel's pending delivery bodies HASH: delivery id -> JSON (the message,
        attempts, created)."""
        return self.channel_prefix(channel_id) + "outmsg"

    def digest(self, channel_id: str) -> str:
        """A channel's dead-letter digest being gathered HASH: count, first_at,
        groups, j:<tenant>|<job> -> count, e<n> -> the first errors (JSON)."""
        return self.channel_prefix(channel_id) + "digest"

    def dlog(self, channel_id: str) -> str:
        """A channel's delivery log STREAM (capped, MAXLEN ~ DLOG_MAX): delivery,
        outcome, status, attempt, error, at."""
        return self.channel_prefix(channel_id) + "dlog"

    def shard(self, shard: int) -> str:
        """The shard prefix passed to scripts as ``KEYS[1]``; ends with ``:``."""
        return f"{self.prefix}:{{s{shard}}}:"

    def retired(self, shard: int, kind: str) -> str:
        """A retired kind's key (:data:`RETIRED`), for the upgrade only."""
        return self.shard(shard) + RETIRED[kind]

    def joined(self, shard: int, kind: str, ids: str) -> str:
        """A key of ``kind`` whose ids are already joined (``<tenant>:<name>:<ck>``):
        for the upgrade's renames, which keep a retired key's ids as they were."""
        return f"{self.shard(shard)}{TEMPLATES[kind][0].partition(':')[0]}:{ids}"

    def build(self, shard: int, kind: str, *parts: object) -> str:
        template, names = TEMPLATES[kind]
        if len(parts) != len(names):
            raise TypeError(f"key {kind!r} takes {names}, got {parts!r}")
        return self.shard(shard) + template.format(**dict(zip(names, map(str, parts), strict=True)))

    def ti(self, shard: int, iid: str) -> str:
        return self.build(shard, "ti", iid)

    def q(self, shard: int, queue: str, tenant: str, priority: str) -> str:
        return self.build(shard, "q", queue, tenant, priority)

    def ring(self, shard: int, queue: str, priority: str) -> str:
        return self.build(shard, "ring", queue, priority)

    def pending(self, shard: int) -> str:
        return self.build(shard, "pending")

    def maintenance(self, shard: int) -> str:
        return self.build(shard, "maintenance")

    def leases(self, shard: int, tenant: str) -> str:
        return self.build(shard, "leases", tenant)

    def timers(self, shard: int) -> str:
        return self.build(shard, "timers")

    def dlq(self, shard: int, tenant: str) -> str:
        return self.build(shard, "dlq", tenant)

    def dlqidx(self, shard: int) -> str:
        return self.build(shard, "dlqidx")

    def wake(self, shard: int, queue: str) -> str:
        return self.build(shard, "wake", queue)

    def log(self, shard: int, iid: str, attempt: int) -> str:
        return self.build(shard, "log", iid, attempt)

    def done(self, shard: int, iid: str) -> str:
        return self.build(shard, "done", iid)

    def tenants(self, shard: int) -> str:
        return self.build(shard, "tenants")

    def jobidx(self, shard: int) -> str:
        return self.build(shard, "jobidx")

    def runidx(self, shard: int) -> str:
        return self.build(shard, "runidx")

    def truns(self, shard: int, tenant: str) -> str:
        return self.build(shard, "truns", tenant)

    def queues(self, shard: int) -> str:
        return self.build(shard, "queues")

    def counters(self, shard: int) -> str:
        return self.build(shard, "counters")

    def recent(self, shard: int) -> str:
        return self.build(shard, "recent")

    def lock(self, shard: int, name: str) -> str:
        return self.build(shard, "lock", name)

    def job(self, shard: int, job_id: str) -> str:
        return self.build(shard, "job", job_id)

    def schedule(self, shard: int) -> str:
        return self.build(shard, "schedule")

    def attention(self, shard: int) -> str:
        return self.build(shard, "attention")

    def run(self, shard: int, run_id: str) -> str:
        return self.build(shard, "run", run_id)

    def runs(self, shard: int, job_id: str) -> str:
        return self.build(shard, "runs", job_id)

    def active(self, shard: int, job_id: str) -> str:
        return self.build(shard, "active", job_id)

    def tenant(self, shard: int, tenant: str) -> str:
        return self.build(shard, "tenant", tenant)

    def oldest(self, shard: int, queue: str, priority: str) -> str:
        return self.build(shard, "oldest", queue, priority)

    def ckslots(self, shard: int, tenant: str, name: str, ck: str) -> str:
        return self.build(shard, "ckslots", tenant, name, ck)

    def ckwaiting(self, shard: int, tenant: str, name: str, ck: str) -> str:
        return self.build(shard, "ckwaiting", tenant, name, ck)

    def rate(self, shard: int, tenant: str, name: str, group: str) -> str:
        return self.build(shard, "rate", tenant, name, group)

    def events(self, shard: int) -> str:
        return self.build(shard, "events")

    def followups(self, shard: int) -> str:
        return self.build(shard, "followups")

    def deadlines(self, shard: int) -> str:
        return self.build(shard, "deadlines")

    def reserved(self, shard: int, tenant: str) -> str:
        return self.build(shard, "reserved", tenant)

    # -- unique windows and debounce (issue 21 §4) --
    def dedupe(self, shard: int, tenant: str, mode: str, digest: str) -> str:
        return self.build(shard, "dedupe", tenant, mode, digest)

    # -- end unique windows and debounce --

    def minute(self, shard: int, minute: int) -> str:
        return self.build(shard, "minute", minute)

    def durations(self, shard: int, tenant: str) -> str:
        return self.build(shard, "durations", tenant)

    def audit(self, shard: int) -> str:
        return self.build(shard, "audit")

    def actions(self, shard: int, tenant: str) -> str:
        return self.build(shard, "actions", tenant)


def lua_key_functions() -> str:
    """Lua source defining ``key_<kind>(...)`` for every template, and the run
    id's builder ``make_run_id(job_id, fire_ms)`` and parser ``job_of_run(run_id)``.

    Each key function prefixes ``KEYS[1]`` (the shard prefix), so every key a
    script builds shares the shard's hash tag.
    """
    out = [
        "-- generated from redcron/keys.py: do not edit",
        "local KP = KEYS[1]",
        f'local GROUP, CONSUMER = "{GROUP}", "{CONSUMER}"',
        f"local ACTIVITY_TTL_S = {ACTIVITY_TTL_S}",
        f"local WAKE_MAX = {WAKE_MAX}",
        # one table, not a local each: reap.lua is near Lua's 200 locals
        f'local MAINT = {{reap_cursor = "{MAINT_REAP_CURSOR}", reap_ttl = "{MAINT_REAP_TTL}", '
        f'stray = "{MAINT_STRAY}", stray_max_ms = {STRAY_MAX_MS}, '
        f'beat_owner = "{MAINT_BEAT_OWNER}", beat_epoch = "{MAINT_BEAT_EPOCH}", '
        f'beat_expiry = "{MAINT_BEAT_EXPIRY}", beat_since = "{MAINT_BEAT_SINCE}"}}',
        f'local TENANT_PARKED = "{TENANT_PARKED}"',
        f'local CKWAKE = "{TIMER_CKWAKE}"',
        f'local COUNTERS = {{attempts = "{COUNTER_ATTEMPTS}", runs = "{COUNTER_RUNS}", '
        f'lag = "{COUNTER_LAG}", late = "{COUNTER_LATE}"}}',
        f"local RUNIDX_MAX, TRUNS_MAX = {RUNIDX_MAX}, {TRUNS_MAX}",
        f'local JOBIDX_SEP = "{JOBIDX_SEP}"',
        f"local EVENTS_MAX = {EVENTS_MAX}",
        f"local EVENT_LAG_MS, EVENT_LAG_EVERY_MS = {EVENT_LAG_MS}, {EVENT_LAG_EVERY_MS}",
        # {upper bound in ms, field name}; the last, +Inf, has no bound
        "local LAG_BUCKETS = {"
        + ", ".join(f'{{{round(b * 1000)}, "{lag_bucket_label(b)}"}}' for b in LAG_BUCKETS_S)
        + ', {math.huge, "+Inf"}}',
        "local DURATION_BUCKETS = {"
        + ", ".join(f'{{{round(b * 1000)}, "{lag_bucket_label(b)}"}}' for b in DURATION_BUCKETS_S)
        + ', {math.huge, "+Inf"}}',
        f'local DURATION_NAMES, DURATION_OTHER = {DURATION_NAMES}, "{DURATION_OTHER}"',
        f'local DURATIONS = {{task = "{DURATIONS_TASK}", job = "{DURATIONS_JOB}"}}',
        f'local MINUTE = {{attempts = "{MINUTE_ATTEMPTS}", lag = "{MINUTE_LAG}", '
        f'dispatched = "{MINUTE_DISPATCHED}"}}',
        f'local ATTENTION = {{breaker = "{ATTENTION_BREAKER}", parked = "{ATTENTION_PARKED}", '
        f'held = "{ATTENTION_HELD}"}}',
    ]
    for kind, (template, names) in TEMPLATES.items():
        pieces: list[str] = []
        rest = template
        for name in names:
            head, _, rest = rest.partition("{" + name + "}")
            if head:
                pieces.append(repr(head).replace("'", '"'))
            pieces.append(f"tostring({name})")
        if rest:
            pieces.append(repr(rest).replace("'", '"'))
        body = " .. ".join(["KP", *pieces])
        out.append(f"local function key_{kind}({', '.join(names)}) return {body} end")
    # a channel's keys (the notify_* scripts get the channel's prefix as KEYS[1])
    for kind in CHANNEL_KINDS:
        out.append(f'local function chan_{kind}() return KP .. "{kind}" end')
    out.append(f"local DLOG_MAX = {DLOG_MAX}")
    # run_id / job_of_run above; the separator is no Lua pattern magic character
    out.append(
        f'local function make_run_id(job_id, fire_ms) return job_id .. "{RUN_SEP}" .. fire_ms end'
    )
    out.append(
        f'local function job_of_run(run_id) return string.match(run_id or "", "^(.-){RUN_SEP}") end'
    )
    # a job's id by (tenant, name): its one member of jobidx (jobidx_range)
    hi = chr(ord(JOBIDX_SEP) + 1)
    out.append(
        "local function job_lookup(tenant, name) "
        f'local head = tenant .. "{JOBIDX_SEP}" .. name '
        f'local m = redis.call("ZRANGEBYLEX", key_jobidx(), "[" .. head .. "{JOBIDX_SEP}", '
        f'"(" .. head .. "{hi}", "LIMIT", 0, 1)[1] '
        "if not m then return nil end "
        "return string.sub(m, #head + 2) end"
    )
    out.append(
        "local function job_member(tenant, name, job_id) "
        f'return tenant .. "{JOBIDX_SEP}" .. name .. "{JOBIDX_SEP}" .. job_id end'
    )
    # a plain find first: a one-off id (the lease and complete hot path) holds no
    # separator, and the pattern would backtrack over the whole id to say so
    out.append(
        f"local function run_of_task(iid) "
        f'if not string.find(iid or "", "{TASK_SEP}", 1, true) then return nil end '
        f'return string.match(iid, "^(.*){TASK_SEP}([^{TASK_SEP}]*)$") end'
    )
    return "\n".join(out) + "\n"
