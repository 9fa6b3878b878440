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

from redcron.broker import argv
from redcron.broker.grants import check_job_grants
from redcron.clock import ulid
from redcron.errors import ValidationError
from redcron.keys import jobidx_parse, jobidx_range, shard_of
from redcron.model import JobChange
from redcron.model.jobs import JobSpec, chain_order, spec_json, spec_json_full
from redcron.schedule.jitter import due_ms, tenant_jitter_s
from redcron.schedule.timeutil import to_ms
from redcron.schedule.triggers import Trigger, next_fire
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.broker import Broker

#: job_put.lua calls per pipeline round trip in :func:`put_many`
PUT_CHUNK = 500
#: reads per pipeline round trip in :func:`put_many`
READ_CHUNK = 5_000


def put_many(
    broker: Broker,
    specs: Sequence[JobSpec],
    now: datetime,
    progress: Callable[[int, int], None] | None = None,
    concurrency: Callable[[JobSpec], Mapping[str, tuple[str, int]]] | None = None,
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
    task's concurrency key value and cap (``App.job_concurrency``), worked out
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
    current, legacy = _current_ids(broker, specs, shards)
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

    def build(shard: int, chunk: list[int]) -> Any:
        pipe = broker.client.pipeline(transaction=False)
        for i in chunk:
            args = _put_args(
                specs[i], triggers[i], shard, current[i], legacy[i], defaults, now,
                tenant_jitter, keyed[i], nominals,
            )  # fmt: skip
            broker._run("job_put", shard, args, pipe)
        return pipe

    def collect(chunk: list[int], replies: list[Any]) -> None:
        nonlocal done
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
        collect(chunk, broker._execute(build(shard, chunk), ordered=True))
        return [change for change in out if change is not None]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="redcron-put") as pool:
        running: tuple[list[int], Future[list[Any]]] | None = None
        for shard, chunk in chunks:
            pipe = build(shard, chunk)
            if running is not None:
                collect(running[0], running[1].result())
            running = (chunk, pool.submit(broker._execute, pipe, True))
        if running is not None:
            collect(running[0], running[1].result())
    return [change for change in out if change is not None]


def _check_upstreams(broker: Broker, specs: Sequence[JobSpec], shards: Sequence[int]) -> None:
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
    broker: Broker, specs: Sequence[JobSpec], shards: Sequence[int]
) -> tuple[list[Any], list[bool]]:
    """Each spec's stored job id (None: a new job), read in pipelines of
    :data:`READ_CHUNK`, and whether that job's hash is an older release's
    layout (it has the field ``id``, which the lean layout leaves to the key):
    then its stored spec is :func:`spec_json_full`'s text."""
    out: list[Any] = []
    idx = {shard: broker.keys.jobidx(shard) for shard in set(shards)}
    for c in range(0, len(specs), READ_CHUNK):
        pipe = broker.client.pipeline(transaction=False)
        for spec, shard in zip(specs[c : c + READ_CHUNK], shards[c : c + READ_CHUNK], strict=True):
            pipe.zrangebylex(idx[shard], *jobidx_range(spec.tenant, spec.name), start=0, num=1)
        for found in pipe.execute():
            job = jobidx_parse(_s(found[0])) if found else None
            out.append(job[2] if job else None)
    legacy = [False] * len(out)
    found_at = [i for i, cur in enumerate(out) if cur]
    for c in range(0, len(found_at), READ_CHUNK):
        pipe = broker.client.pipeline(transaction=False)
        for i in found_at[c : c + READ_CHUNK]:
            pipe.hexists(broker.keys.job(shards[i], out[i]), "id")
        for i, old in zip(found_at[c : c + READ_CHUNK], pipe.execute(), strict=True):
            legacy[i] = bool(old)
    return out, legacy


def _put_args(
    spec: JobSpec,
    trigger: Trigger,
    shard: int,
    cur: Any,
    legacy: bool,
    defaults: dict[str, Any],
    now: datetime,
    tenant_jitter: dict[tuple[int, str], float],
    keyed: Mapping[str, tuple[str, int]] | None = None,
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
