"""The one-time upgrade of a deployment written by an older release to this
release's key layout (:data:`redcron.keys.LAYOUT`, ``layout`` in the meta HASH).

Every step is idempotent, so two processes starting at once may both run it.
It runs at a process's first use of the deployment (``Core.ensure_meta``),
before any script writes, because this release's scripts write some keys with
another type than an older release did (``tenants`` was a SET, is a ZSET): a
script meeting the old type would fail with ``WRONGTYPE``.  Processes of the
older release must be stopped before processes of this one start
(docs/operations.md "Upgrading"): they would fail the same way on the new
types.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import redis

from redcron.engine.connection import raise_unreachable
from redcron.keys import (
    ACTIVITY_TTL_S,
    ATTENTION_BREAKER,
    ATTENTION_HELD,
    ATTENTION_PARKED,
    COUNTER_ATTEMPTS,
    COUNTER_LAG,
    COUNTER_LATE,
    COUNTER_RUNS,
    DEPLOYMENT_KINDS,
    DEPLOYMENT_NAMES,
    DURATIONS_JOB,
    DURATIONS_TASK,
    JOBIDX_SEP,
    LAYOUT,
    MAINT_BEAT_EPOCH,
    MAINT_BEAT_EXPIRY,
    MAINT_BEAT_OWNER,
    MAINT_BEAT_SINCE,
    MAINT_INDEX_VERSION,
    MAINT_REAP_CURSOR,
    MAINT_REAP_TTL,
    MAINT_RECENT_CURSOR,
    MINUTE_ATTEMPTS,
    MINUTE_DISPATCHED,
    MINUTE_LAG,
    RUN_SEP,
    TENANT_PARKED,
    Keys,
    glob_escape,
    job_of_run,
    jobidx_member,
    jobidx_parse,
    jobidx_range,
)
from redcron.model.dedupe import ONCE
from redcron.serde import text as _s

log = logging.getLogger(__name__)


def upgrade_layout(client: Any, keys: Keys, shards: int, layout: int) -> None:
    """Bring every shard from ``layout`` (the meta's, 1 when absent) to
    :data:`LAYOUT`, then record it; nothing when it is there already."""
    if layout >= LAYOUT:
        return
    now_minute = int(client.time()[0]) // 60
    for shard in range(shards):
        _tenants_to_zset(client, keys, shard)
        _bookkeeping_to_maintenance(client, keys, shard)
        _counters_merged(client, keys, shard)
        _durations_merged(client, keys, shard)
        _minutes_merged(client, keys, shard, now_minute)
        _attention_merged(client, keys, shard)
        _beat_to_maintenance(client, keys, shard)
    _dedupe_renamed(client, keys)
    _held_to_attention(client, keys)
    _parked_to_tenant_field(client, keys)
    _kinds_renamed(client, keys)
    _chainok_to_job_field(client, keys)
    _jobs_into_jobidx(client, keys)
    _once_to_dedupe(client, keys)
    _chaindown_to_job_field(client, keys)
    move_deployment_keys(client, keys)
    client.hset(keys.meta(), "layout", LAYOUT)
    log.info("deployment at prefix %r upgraded to key layout %d", keys.prefix, LAYOUT)


def _tenants_to_zset(client: Any, keys: Keys, shard: int) -> None:
    """Layout 2: ``tenants`` (a SET) and ``tenantidx`` (a ZSET, all scored 0)
    become one ZSET ``tenants``, all scored 0.  ``ZUNIONSTORE`` takes a SET as
    input and replaces its destination in one step, so no tenant is lost to an
    enqueue in between."""
    tenants, old = keys.tenants(shard), keys.retired(shard, "tenantidx")
    if _s(client.type(tenants)) == "set":
        client.zunionstore(tenants, {tenants: 0, old: 0})
    client.delete(old)


def _bookkeeping_to_maintenance(client: Any, keys: Keys, shard: int) -> None:
    """Layout 2: the reaper's ``reapcur`` and ``reapttl`` HASHes (field: stream
    key), ``recentcur`` and ``indexed`` (STRINGs) become fields of one
    ``maintenance`` HASH.  ``HSETNX``: a value this release wrote already wins."""
    upkeep = keys.maintenance(shard)
    cur, ttl = keys.retired(shard, "reapcur"), keys.retired(shard, "reapttl")
    recent, indexed = keys.retired(shard, "recentcur"), keys.retired(shard, "indexed")
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(cur)
    pipe.hgetall(ttl)
    pipe.get(recent)
    pipe.get(indexed)
    cursors, ttls, recent_at, version = pipe.execute()
    pipe = client.pipeline(transaction=False)
    for stream, cursor in cursors.items():
        pipe.hsetnx(upkeep, MAINT_REAP_CURSOR + _s(stream), cursor)
    for stream, ms in ttls.items():
        pipe.hsetnx(upkeep, MAINT_REAP_TTL + _s(stream), ms)
    if recent_at is not None:
        pipe.hsetnx(upkeep, MAINT_RECENT_CURSOR, recent_at)
    if version is not None:
        pipe.hsetnx(upkeep, MAINT_INDEX_VERSION, version)
    for key in (cur, ttl, recent, indexed):  # one key a DEL: a cluster pipeline's rule
        pipe.delete(key)
    pipe.execute()


#: layout 3: each retired lifetime-counter HASH -> the prefix its fields take in
#: ``counters`` (the stats fields keep their names)
_COUNTER_PREFIXES = {
    "stats": "",
    "attempts": COUNTER_ATTEMPTS,
    "attemptsall": COUNTER_ATTEMPTS + "*|",
    "runends": COUNTER_RUNS,
    "runendsall": COUNTER_RUNS + "*|",
    "lag": COUNTER_LAG,
    "late": COUNTER_LATE,
}


def _beat_to_maintenance(client: Any, keys: Keys, shard: int) -> None:
    """Layout 4: the shard's ownership HASH ``beat`` (owner, epoch, expiry,
    since) becomes the fields ``beat_*`` of its ``maintenance`` HASH.  The epoch
    is carried and never lowered (the larger of the two wins), so no epoch is
    ever handed out twice and fire.lua's fence holds across the upgrade; the
    other fields are carried only when absent (a beat of this release may have
    written them already)."""
    old = keys.retired(shard, "beat")
    f = {_s(k): _s(v) for k, v in client.hgetall(old).items()}
    if not f:
        return
    mk = keys.maintenance(shard)
    epoch = max(int(f.get("epoch") or 0), int(_s(client.hget(mk, MAINT_BEAT_EPOCH) or b"0")))
    client.hset(mk, MAINT_BEAT_EPOCH, epoch)
    for name, field in (
        ("owner", MAINT_BEAT_OWNER),
        ("expiry", MAINT_BEAT_EXPIRY),
        ("since", MAINT_BEAT_SINCE),
    ):
        if name in f:
            client.hsetnx(mk, field, f[name])
    client.delete(old)


def _counters_merged(client: Any, keys: Keys, shard: int) -> None:
    """Layout 3: the lifetime counter HASHes ``stats``, ``attempts``,
    ``attemptsall``, ``runends``, ``runendsall``, ``lag`` and ``late`` become
    fields of one ``counters`` HASH, so the lifetime figures go on from where
    they were instead of starting over.  Added (``HINCRBY``) to whatever this
    release counted already, and each old hash deleted in the same pipeline as
    its increments.  Not guarded against two processes of this release
    upgrading the same shard in the same instant: then a counter may be carried
    twice (docs/operations.md "Upgrading")."""
    target = keys.counters(shard)
    for kind, prefix in _COUNTER_PREFIXES.items():
        _add_into(client, keys.retired(shard, kind), target, prefix)


def _add_into(client: Any, old: str, target: str, prefix: str) -> None:
    """Add the counts of HASH ``old`` into ``target``'s fields ``prefix`` + its
    field names, and delete ``old`` in the same pipeline."""
    fields = client.hgetall(old)
    if not fields:
        return
    pipe = client.pipeline(transaction=False)
    for field, n in fields.items():
        pipe.hincrby(target, prefix + _s(field), int(n))
    pipe.delete(old)
    pipe.execute()


def _durations_merged(client: Any, keys: Keys, shard: int) -> None:
    """Layout 3: a tenant's ``adur:<tenant>`` and ``rdur:<tenant>`` (duration
    histograms of its attempts per task name, of its runs per job name) become
    one ``durations:<tenant>``, their fields under ``task:`` and ``job:``
    (``#names`` too: each kind keeps its own cap).  The tenants come from the
    shard's ``tenants`` index (upgraded first), no SCAN; added as the counters
    are (``_counters_merged``)."""
    tenants = [_s(t) for t in client.zrange(keys.tenants(shard), 0, -1)]
    for tenant in tenants:
        target = keys.durations(shard, tenant)
        for kind, prefix in (("adur", DURATIONS_TASK), ("rdur", DURATIONS_JOB)):
            _add_into(client, f"{keys.retired(shard, kind)}:{tenant}", target, prefix)


#: layout 4: each retired per-minute HASH kind -> the prefix its fields take in
#: ``minute:<minute>``
_MINUTE_PREFIXES = {"act": MINUTE_ATTEMPTS, "lagm": MINUTE_LAG, "disp": MINUTE_DISPATCHED}


def _minutes_merged(client: Any, keys: Keys, shard: int, now_minute: int) -> None:
    """Layout 4: the per-minute HASHes ``act:<minute>``, ``lagm:<minute>`` and
    ``disp:<minute>`` become fields of one ``minute:<minute>`` (``attempts:``,
    ``lag:``, ``dispatched:`` before the old field names), so the dashboard's
    last hour goes on across the upgrade.  No SCAN: they lived at most
    ACTIVITY_TTL_S (``disp`` 3 min), so the minutes since then are read, one
    pipelined round trip per shard; what an older one held had expired.  Added
    and deleted as the counters are (``_counters_merged``); the target expires
    ACTIVITY_TTL_S after, as a script's first write would have it."""
    olds = [
        (f"{keys.retired(shard, kind)}:{m}", keys.minute(shard, m), prefix)
        for m in range(now_minute - ACTIVITY_TTL_S // 60 - 1, now_minute + 2)
        for kind, prefix in _MINUTE_PREFIXES.items()
    ]
    pipe = client.pipeline(transaction=False)
    for old, _target, _prefix in olds:
        pipe.hgetall(old)
    found = [(o, fields) for o, fields in zip(olds, pipe.execute(), strict=True) if fields]
    if not found:
        return
    pipe = client.pipeline(transaction=False)
    for (old, target, prefix), fields in found:
        for field, n in fields.items():
            pipe.hincrby(target, prefix + _s(field), int(n))
        pipe.expire(target, ACTIVITY_TTL_S)
        pipe.delete(old)
    pipe.execute()


def _attention_merged(client: Any, keys: Keys, shard: int) -> None:
    """Layout 4: ``brkopen`` (jobs whose breaker is open or in trial) and
    ``jobparked`` (jobs the beat parked), two ZSETs of job ids, become the
    members ``breaker:<job id>`` and ``parked:<job id>`` of one ``attention``
    ZSET, all scored 0.  Kept, not dropped: an open breaker missing from it is
    not shown on the dashboard, a parked job not counted by ``/metrics``.  A
    member this release added already stays (``ZADD`` of the same member)."""
    target = keys.attention(shard)
    for kind, prefix in (("brkopen", ATTENTION_BREAKER), ("jobparked", ATTENTION_PARKED)):
        old = keys.retired(shard, kind)
        ids = client.zrange(old, 0, -1)
        pipe = client.pipeline(transaction=False)
        if ids:
            pipe.zadd(target, {prefix + _s(j): 0 for j in ids})
        pipe.delete(old)
        pipe.execute()


def _held_to_attention(client: Any, keys: Keys) -> None:
    """Layout 4: a job's ``held:<job id>`` LIST of the instances its open breaker
    holds aside becomes members ``held:<instance id>`` of its shard's
    ``attention`` ZSET (the instance ids name their job).  Kept, not dropped: a
    held instance missing there would never be released.  Named by no index:
    one ``SCAN … MATCH`` pass, once per deployment; each list's members added
    and the list deleted in one pipeline."""
    for key, shard, _job in _retired_keys(client, keys, "held"):
        iids = client.lrange(key, 0, -1)
        pipe = client.pipeline(transaction=False)
        if iids:
            pipe.zadd(keys.attention(shard), {ATTENTION_HELD + _s(i): 0 for i in iids})
        pipe.delete(key)
        pipe.execute()


#: (retired kind, its mode in ``dedupe``) for the layout-2 rename
_DEDUPE_MODES = (("uniq", "unique"), ("debounce", "debounce"))


def _shard_and_rest(keys: Keys, kind: str, key: str) -> tuple[int, str] | None:
    """(shard, what follows ``<kind>:``) of a retired per-tenant key; None when
    the key is not one (a name that only matched the pattern)."""
    tag, _, rest = key[len(keys.prefix) + 1 :].partition(":")
    shard = tag[2:-1]
    if tag[:2] != "{s" or tag[-1:] != "}" or not shard.isdigit():
        return None
    if not rest.startswith(kind + ":"):
        return None
    return int(shard), rest[len(kind) + 1 :]


def _retired_keys(client: Any, keys: Keys, kind: str) -> Iterator[tuple[str, int, str]]:
    """(key, shard, what follows ``<kind>:``) of every key of a retired per-id
    kind: one ``SCAN … MATCH`` pass (every master of a cluster); names that only
    matched the pattern, or have nothing after the kind, are left out."""
    for raw in client.scan_iter(match=f"{keys.prefix}:{{s*}}:{kind}:*", count=1000):
        key = _s(raw)
        found = _shard_and_rest(keys, kind, key)
        if found is not None and found[1]:
            yield key, found[0], found[1]


def _dedupe_renamed(client: Any, keys: Keys) -> None:
    """Layout 2: ``uniq:<tenant>:<digest>`` and ``debounce:<tenant>:<digest>``
    become ``dedupe:<tenant>:<mode>:<digest>``, so a unique window or a
    debounce group open at the upgrade still holds.  Named by no index: one
    ``SCAN … MATCH`` pass per retired kind (every master of a cluster), once
    per deployment.  ``RENAME`` keeps the expiry; a key that expired meanwhile
    is simply gone (its error is ignored)."""
    for kind, mode in _DEDUPE_MODES:
        pattern = f"{keys.prefix}:{{s*}}:{kind}:*"
        pipe = client.pipeline(transaction=False)
        queued = 0
        for raw in client.scan_iter(match=pattern, count=1000):
            key = _s(raw)
            found = _shard_and_rest(keys, kind, key)
            tenant, _, digest = found[1].rpartition(":") if found else ("", "", "")
            if found is None or not tenant or not digest:
                continue
            pipe.rename(key, keys.dedupe(found[0], tenant, mode, digest))
            queued += 1
            if queued % 500 == 0:
                raise_unreachable(pipe.execute(raise_on_error=False))
        if queued % 500:
            # a key gone meanwhile is fine; a master down or CLUSTERDOWN is not:
            # the upgrade stops unrecorded, and runs again at the next start
            raise_unreachable(pipe.execute(raise_on_error=False))


def _parked_to_tenant_field(client: Any, keys: Keys) -> None:
    """Layout 2: a tenant's ``parked:<tenant>`` SET of ``<queue>|<class>``
    becomes the field ``parked`` (a comma list) of its ``tenant:<tenant>``
    hash.  Kept, not dropped: a tenant parked off a ring with no record of it
    would wait off that ring until the doctor found it.  One ``SCAN … MATCH``
    pass; what the field already lists stays."""
    for key, shard, rest in _retired_keys(client, keys, "parked"):
        tenant = rest
        tk = keys.tenant(shard, tenant)
        pipe = client.pipeline(transaction=False)
        pipe.smembers(key)
        pipe.hget(tk, TENANT_PARKED)
        members, listed = pipe.execute()
        rings = [qc for qc in _s(listed).split(",") if qc] if listed else []
        rings += sorted(_s(m) for m in members if _s(m) not in rings)
        pipe = client.pipeline(transaction=False)
        if rings:
            pipe.hset(tk, TENANT_PARKED, ",".join(rings))
        pipe.delete(key)
        pipe.execute()


#: layout 2's renames for readability: retired kind -> today's (ids kept)
_RENAMED = {"tleases": "leases", "cks": "ckslots", "ckq": "ckwaiting"}


def _kinds_renamed(client: Any, keys: Keys) -> None:
    """Layout 2: ``tleases:<tenant>`` -> ``leases:<tenant>``, ``cks:…`` ->
    ``ckslots:…``, ``ckq:…`` -> ``ckwaiting:…``.  Kept, not dropped: a lease
    missing from ``leases`` would not count against its tenant's cap, a slot
    missing from ``ckslots`` would let one more run, and a waiter missing from
    ``ckwaiting`` would never be woken.  One ``SCAN … MATCH`` pass per kind.
    The two ZSETs are merged into whatever the new name already holds
    (``ZUNIONSTORE … AGGREGATE MAX``); the list is renamed when the new name is
    free (``RENAMENX``; else it is left for the doctor's ``ckq_added``)."""
    for old, new in _RENAMED.items():
        for key, shard, rest in _retired_keys(client, keys, old):
            target = keys.joined(shard, new, rest)
            if new == "ckwaiting":
                if not client.renamenx(key, target):
                    log.warning("upgrade: %s left in place, %s exists", key, target)
                continue
            client.zunionstore(target, [target, key], aggregate="MAX")
            client.delete(key)


def _chainok_to_job_field(client: Any, keys: Keys) -> None:
    """Layout 4: a job's ``chainok:<job id>`` SET (the upstream names that have
    had a succeeded run since its last chained or scheduled run) becomes the
    field ``chain_ok`` (a comma list) of its ``job:<job id>`` hash.  Kept, not
    dropped: an upstream's success noted before the upgrade must still count,
    or the job waits for a run that already happened.  One ``SCAN … MATCH``
    pass; only names the job still lists in ``upstreams`` are carried (job_put
    keeps it so), added to what the field already lists, and a SET whose job
    is gone is simply deleted (no hash is made for it)."""
    for key, shard, rest in _retired_keys(client, keys, "chainok"):
        job_id = rest
        jk = keys.job(shard, job_id)
        pipe = client.pipeline(transaction=False)
        pipe.smembers(key)
        pipe.hmget(jk, "upstreams", "chain_ok")
        members, (upstreams, listed) = pipe.execute()
        ups = [u for u in _s(upstreams).split(",") if u] if upstreams else []
        names = [u for u in _s(listed).split(",") if u] if listed else []
        names += sorted(n for m in members if (n := _s(m)) in ups and n not in names)
        pipe = client.pipeline(transaction=False)
        if names:
            pipe.hset(jk, "chain_ok", ",".join(names))
        pipe.delete(key)
        pipe.execute()


def _jobs_into_jobidx(client: Any, keys: Keys) -> None:
    """Layout 4: a tenant's ``jobs:<tenant>`` HASH (job name -> job id, the
    upsert key) becomes the job id in its ``jobidx`` member: ``<tenant> <name>``
    is replaced by ``<tenant> <name> <job id>``.  Kept, not dropped: a job
    missing from it would be neither listed nor found by name, and a put of
    the same name would make a second job.  One ``SCAN … MATCH`` pass (every
    master of a cluster), then each shard's ``jobidx`` loses what is left of
    the old shape (a member of a job no ``jobs`` hash named)."""
    touched: set[int] = set()
    for key, shard, rest in _retired_keys(client, keys, "jobs"):
        tenant = rest
        touched.add(shard)
        idx = keys.jobidx(shard)
        pipe = client.pipeline(transaction=False)
        for name, job_id in client.hgetall(key).items():
            pipe.zadd(idx, {jobidx_member(tenant, _s(name), _s(job_id)): 0})
            pipe.zrem(idx, f"{tenant}{JOBIDX_SEP}{_s(name)}")
        pipe.delete(key)
        pipe.execute()
    for shard in touched:
        idx = keys.jobidx(shard)
        old = [m for m, _ in client.zscan_iter(idx, count=1000) if _s(m).count(JOBIDX_SEP) != 2]
        for start in range(0, len(old), 500):
            client.zrem(idx, *old[start : start + 500])


def _once_to_dedupe(client: Any, keys: Keys) -> None:
    """Layout 4: a ``ctx.once`` record ``once:<idem_key>:<key>`` becomes
    ``dedupe:<tenant>:once:<idem_key>:<key>``, under the tenant of the task that
    wrote it, so an effect recorded before the upgrade is still not repeated by
    a retry after it.  The old name holds no tenant: it is read from the task's
    run (``<run id>:<task>``: the run hash, else its job's) or its instance hash
    (a one-off's ``<task id>``).  A record whose task left no trace can guard
    nothing any more (no attempt of it can run again) and is deleted.  One
    ``SCAN … MATCH`` pass; ``RENAMENX`` keeps the expiry and never overwrites a
    record this release wrote (the old one is then deleted)."""
    for key, shard, rest in _retired_keys(client, keys, "once"):
        head = rest.partition(":")[0]
        if RUN_SEP in head:
            tenant = client.hget(keys.run(shard, head), "tenant")
            tenant = tenant or client.hget(keys.job(shard, job_of_run(head)), "tenant")
        else:
            tenant = client.hget(keys.ti(shard, head), "tenant")
        moved: Any = 0
        if tenant:
            pipe = client.pipeline(transaction=False)
            pipe.renamenx(key, keys.dedupe(shard, _s(tenant), ONCE, rest))
            # an error: the key expired, or another process moved it, meanwhile
            replies = pipe.execute(raise_on_error=False)
            raise_unreachable(replies)
            (moved,) = replies
        if not moved:
            client.delete(key)


def _chaindown_to_job_field(client: Any, keys: Keys) -> None:
    """Layout 4: ``chaindown:<tenant>:<name>`` (a SET of the names of the
    tenant's jobs that name job ``<name>`` in ``depends_on``) becomes the field
    ``chain_down`` (a comma list) of that upstream job's hash, found by name in
    ``jobidx`` (so after :func:`_jobs_into_jobidx`).  Kept, not dropped: without
    it an upstream's succeeded run would start none of its dependents, and the
    upstream could be deleted under them.  One ``SCAN … MATCH`` pass; a SET
    whose upstream job is gone indexes nothing and is deleted."""
    for raw in client.scan_iter(match=f"{keys.prefix}:{{s*}}:chaindown:*", count=1000):
        key = _s(raw)
        found = _shard_and_rest(keys, "chaindown", key)
        tenant, _, name = found[1].partition(":") if found else ("", "", "")
        if found is None or not tenant or not name:
            continue
        shard = found[0]
        hit = client.zrangebylex(keys.jobidx(shard), *jobidx_range(tenant, name), start=0, num=1)
        job = jobidx_parse(_s(hit[0])) if hit else None
        if job is not None:
            jk = keys.job(shard, job[2])
            listed = _s(client.hget(jk, "chain_down") or b"")
            names = [n for n in listed.split(",") if n]
            names += sorted(n for m in client.smembers(key) if (n := _s(m)) not in names)
            if names:
                client.hset(jk, "chain_down", ",".join(names))
        client.delete(key)


def move_deployment_keys(client: Any, keys: Keys) -> int:
    """Layout 5: the deployment-wide keys (the meta, the beat and worker
    registries, API tokens, logins, the shared secrets, the action log, the
    channel index) move under the hash tag ``{g}``, into one slot: on a Redis
    Cluster they were spread over the masters by their names, so any master
    down took some of them, and every page and token check with them.

    Each key is copied (``DUMP``/``RESTORE`` with its TTL: the names are in
    different slots, ``RENAME`` cannot cross them) and then deleted; a key
    already at its new name (a start before this one got that far) stands, and
    the old one goes.  Returns how many keys moved."""
    moved = 0
    for name in DEPLOYMENT_NAMES:
        moved += _move(client, keys.legacy_deployment(name), keys.deployment(name))
    for kind in DEPLOYMENT_KINDS:
        head = keys.legacy_deployment(kind) + ":"
        for raw in client.scan_iter(match=glob_escape(head) + "*", count=1000):
            old = _s(raw)
            moved += _move(client, old, keys.deployment(kind + ":" + old[len(head) :]))
    if moved:
        log.info("moved %d deployment-wide keys into the slot of %s", moved, keys.meta())
    return moved


def _move(client: Any, old: str, new: str) -> int:
    dump = client.dump(old)
    if dump is None:
        return 0
    ttl = int(client.pttl(old))
    if ttl == -2:  # expired between the two calls
        return 0
    try:
        client.restore(new, max(ttl, 0), dump)
    except redis.ResponseError as exc:
        if "BUSYKEY" not in str(exc):
            raise
    client.delete(old)
    return 1
