"""Writing jobs in bulk: ``job_put.lua`` calls pipelined shard by shard.

:func:`put_many` is behind ``JobStore.put``/``put_many``, ``jobs apply -f``,
``App.apply_declared`` and the benches' set-up.  Everything is validated (and
the batch's command grants checked) before the first write.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any

from redcron.clock import ulid
from redcron.engine import argv
from redcron.engine.grants import check_job_grants
from redcron.errors import ValidationError
from redcron.keys import jobidx_parse, jobidx_range, shard_of
from redcron.model import JobChange
from redcron.model.jobs import JobSpec, chain_order, spec_json, spec_json_full
from redcron.schedule.jitter import due_ms, tenant_jitter_s
from redcron.schedule.timeutil import to_ms
from redcron.schedule.triggers import Trigger, next_fire
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core

#: job_put.lua calls per pipeline round trip in :func:`put_many`
PUT_CHUNK = 500
#: reads per pipeline round trip in :func:`put_many`
READ_CHUNK = 5_000


def put_many(
    broker: Core,
    specs: Sequence[JobSpec],
    now: datetime,
    progress: Callable[[int, int], None] | None = None,
    concurrency: Callable[[JobSpec], Mapping[str, Mapping[str, Any]]] | None = None,
) -> list[JobChange]:
    """Create or update many jobs (``JobStore.put_many``: ``jobs apply -f``, benches).

    Every spec is validated, and the batch's command grants checked, before
    anything is written.  Then the jobs go out shard by shard,
    :data:`PUT_CHUNK` ``job_put.lua`` calls per pipeline (each call is short:
    a few tens of us of Redis time, so no call blocks the server however
    large the batch); each call writes the whole job, its circuit-breaker
    settings and deadline included, atomically.  ``progress(done, total)``
    is called after every chunk.  A
    script's refusal there (a new job id taken, a grant revoked meanwhile)
    raises with the chunks before it written, as ``JobStore.put`` would have.
    One change per spec, in the order given.  ``concurrency(spec)``: each
    task's concurrency key and rate fields (``App.job_concurrency``), worked out
    here with the validation, before the first write.
    """
    settings = broker.settings
    defaults = settings.task_defaults()
    triggers: list[Trigger] = []
    for spec in specs:
        triggers.append(spec.validate())
        try:
            spec.check_backoff(defaults)
        except ValidationError as exc:
            if len(specs) == 1:
                raise
            # name the job: a batch may hold thousands
            raise ValidationError(f"job {spec.name!r}: {exc.field}", exc.message) from exc
    keyed = [concurrency(spec) if concurrency else {} for spec in specs]
    shards = [shard_of(spec.tenant, broker.shards) for spec in specs]
    tenants = sorted({(shard, spec.tenant) for spec, shard in zip(specs, shards, strict=True)})
    pipe = broker.client.pipeline(transaction=False)
    for shard, tenant in tenants:
        pipe.hmget(broker.keys.tenant(shard, tenant), ["jitter_s", "allow_commands"])
    settings_of = pipe.execute() if tenants else []
    tenant_jitter = {
        st: tenant_jitter_s(raw[0]) for st, raw in zip(tenants, settings_of, strict=True)
    }
    granted = {
        st
        for st, raw in zip(tenants, settings_of, strict=True)
        if raw[1] is not None and _s(raw[1]) == "1"
    }
    # a stored job's id matters here only to its jitter (due_ms hashes it) and
    # to a grant check; job_put.lua finds it itself otherwise (one read a job fewer)
    current = _current_ids(
        broker,
        specs,
        shards,
        [
            i
            for i, (spec, shard) in enumerate(zip(specs, shards, strict=True))
            if spec.jitter_s
            or tenant_jitter[shard, spec.tenant]
            or (
                (shard, spec.tenant) not in granted
                and any(task.kind != "python" for task in spec.tasks.values())
            )
        ],
    )
    check_job_grants(broker, specs, shards, current, granted, spec_json)
    _check_upstreams(broker, specs, shards)
    by_shard: dict[int, list[int]] = {}
    for i in chain_order(specs):  # upstreams first: job_put.lua checks that they exist
        by_shard.setdefault(shards[i], []).append(i)
    out: list[JobChange | None] = [None] * len(specs)
    chunks = [
        (shard, indexes[c : c + PUT_CHUNK])
        for shard, indexes in sorted(by_shard.items())
        for c in range(0, len(indexes), PUT_CHUNK)
    ]
    done = 0
    nominals: dict[int, datetime | None] = {}

    def build(shard: int, chunk: list[int], legacy: bool = False) -> Any:
        pipe = broker.client.pipeline(transaction=False)
        for i in chunk:
            args = _put_args(
                specs[i], triggers[i], shard, current[i], legacy, defaults, now,
                tenant_jitter, keyed[i], nominals,
            )  # fmt: skip
            broker._run("job_put", shard, args, pipe)
        return pipe

    def collect(shard: int, chunk: list[int], replies: list[Any]) -> None:
        nonlocal done
        # job_put wrote nothing for a job whose hash an older release wrote: it
        # goes again at once, with the sha1 of its spec as that release stored it
        again = [i for i, reply in zip(chunk, replies, strict=True) if _s(reply[2]) == "legacy"]
        if again:
            got = dict(zip(again, broker._execute(build(shard, again, True), True), strict=True))
            replies = [got.get(i, reply) for i, reply in zip(chunk, replies, strict=True)]
        for i, reply in zip(chunk, replies, strict=True):
            out[i] = JobChange.parse(specs[i].tenant, specs[i].name, reply)
        done += len(chunk)
        if progress is not None:
            progress(done, len(specs))

    # ordered (``_execute(..., ordered=True)``, one chunk after the other): a
    # (tenant, name) given twice ends as its last spec says.  With more than one
    # chunk, the next chunk's rows are built while Redis runs the one before (a
    # thread waits on the socket; the GIL is free meanwhile), and a chunk is sent
    # only once the one before it came back without a refusal: set-up takes
    # about the longer of the two, not their sum.
    if len(chunks) == 1:
        shard, chunk = chunks[0]
        collect(shard, chunk, broker._execute(build(shard, chunk), ordered=True))
        return [change for change in out if change is not None]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="redcron-put") as pool:
        running: tuple[int, list[int], Future[list[Any]]] | None = None
        for shard, chunk in chunks:
            pipe = build(shard, chunk)
            if running is not None:
                collect(running[0], running[1], running[2].result())
            running = (shard, chunk, pool.submit(broker._execute, pipe, True))
        if running is not None:
            collect(running[0], running[1], running[2].result())
    return [change for change in out if change is not None]


def _check_upstreams(broker: Core, specs: Sequence[JobSpec], shards: Sequence[int]) -> None:
    """Every job-level ``depends_on`` names a job of the same tenant, in the batch
    or stored (another tenant's job is unknown, as it is invisible): checked
    before the first write, so a batch with a typo writes nothing.  job_put.lua
    checks again, atomically, with cycles through the stored jobs."""
    batch = {(spec.tenant, spec.name) for spec in specs}
    asked = sorted(
        {(shard, spec.tenant, dep)
         for spec, shard in zip(specs, shards, strict=True)
         for dep in spec.depends_on if (spec.tenant, dep) not in batch}
    )  # fmt: skip
    if not asked:
        return
    pipe = broker.client.pipeline(transaction=False)
    for shard, tenant, dep in asked:
        pipe.zrangebylex(broker.keys.jobidx(shard), *jobidx_range(tenant, dep), start=0, num=1)
    known = {(t, d) for (_s, t, d), found in zip(asked, pipe.execute(), strict=True) if found}
    for spec in specs:
        for dep in spec.depends_on:
            if (spec.tenant, dep) not in batch and (spec.tenant, dep) not in known:
                field = "depends_on" if len(specs) == 1 else f"job {spec.name!r}: depends_on"
                raise ValidationError(
                    field, f"unknown job {dep!r} of tenant {spec.tenant!r}; create it first"
                )


def _current_ids(
    broker: Core, specs: Sequence[JobSpec], shards: Sequence[int], wanted: Sequence[int]
) -> list[Any]:
    """The stored job id of each spec of ``wanted`` (None: a new job, or a spec not
    wanted), read in pipelines of :data:`READ_CHUNK`."""
    out: list[Any] = [None] * len(specs)
    idx = {shard: broker.keys.jobidx(shard) for shard in set(shards)}
    for c in range(0, len(wanted), READ_CHUNK):
        pipe = broker.client.pipeline(transaction=False)
        for i in wanted[c : c + READ_CHUNK]:
            spec = specs[i]
            pipe.zrangebylex(idx[shards[i]], *jobidx_range(spec.tenant, spec.name), start=0, num=1)
        for i, found in zip(wanted[c : c + READ_CHUNK], pipe.execute(), strict=True):
            job = jobidx_parse(_s(found[0])) if found else None
            out[i] = job[2] if job else None
    return out


def _put_args(
    spec: JobSpec,
    trigger: Trigger,
    shard: int,
    cur: Any,
    legacy: bool,
    defaults: dict[str, Any],
    now: datetime,
    tenant_jitter: dict[tuple[int, str], float],
    keyed: Mapping[str, Mapping[str, Any]] | None = None,
    nominals: dict[int, datetime | None] | None = None,
) -> list[Any]:
    """job_put.lua's ARGV for one spec (``trigger``: its validated trigger;
    ``nominals``: next fires already computed, by trigger: see :func:`_next_fire`)."""
    template, task_args = spec.template(defaults, keyed)
    new_id = f"{shard}-{ulid()}"
    job_id = _s(cur) if cur else new_id
    nominal = None if spec.paused else _next_fire(trigger, now, nominals)
    nominal_ms: Any = ""
    due: Any = ""
    if nominal is not None:
        nominal_ms = to_ms(nominal)
        due = due_ms(job_id, spec.jitter_s, nominal_ms, tenant_jitter[shard, spec.tenant])
    at = spec.at.isoformat() if spec.at else None
    return argv.job_put(
        spec.tenant,
        spec.name,
        new_id,
        spec_json(spec),
        template,
        json.dumps([spec.cron, spec.every, at, spec.tz]),
        nominal_ms,
        due,
        spec.hash_settings(),
        task_args,
        depends_on=spec.depends_on,
        legacy=hashlib.sha1(spec_json_full(spec).encode()).hexdigest() if legacy else "",
    )


def _next_fire(
    trigger: Trigger, now: datetime, nominals: dict[int, datetime | None] | None
) -> datetime | None:
    """``next_fire(trigger, now)``, computed once per Trigger object of a put_many
    call (jobs of one schedule share one: ``JobSpec.trigger`` caches them; keyed
    by identity, as the triggers outlive the call's dict)."""
    if nominals is None:
        return next_fire(trigger, now)
    key = id(trigger)
    if key not in nominals:
        nominals[key] = next_fire(trigger, now)
    return nominals[key]
