"""Jobs and runs in Redis: upsert, list, pause/resume, delete, trigger; run
history, cancel and retry.  Scripts do every write; this module validates,
computes fire times in Python and reads."""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from redcron import tracing
from redcron.clock import ulid
from redcron.engine import argv
from redcron.engine.beat import BeatStore
from redcron.engine.cancel import RunCancel, run_cancel
from redcron.engine.core import PAYLOADS, fields_of
from redcron.engine.job_writes import put_many
from redcron.engine.partial import read_shards
from redcron.engine.registered import refuse_unregistered
from redcron.errors import Conflict, NotFound, NotReplicated, QuotaExceeded, ValidationError
from redcron.keys import (
    ATTENTION_BREAKER,
    jobidx_parse,
    jobidx_range,
    manual_run_id,
    prefix_range,
    shard_of,
    shard_of_id,
)
from redcron.model import (
    Event,
    ExpiredTask,
    JobChange,
    JobRecord,
    RunRecord,
    TaskRecord,
)
from redcron.model.jobfile import parse_jobs
from redcron.model.jobs import JobSpec, job_spec, spec_text_full

# spec_from_json lives in model/jobs.py (pure: spec JSON, DESIGN §2); re-exported
# here so that modules importing it from redcron.engine.jobs (on other branches too)
# keep working
from redcron.model.jobs import spec_from_json as spec_from_json
from redcron.model.retry_rule import with_registered
from redcron.model.states import RunState
from redcron.schedule.jitter import due_ms, tenant_jitter_s
from redcron.schedule.timeutil import from_ms, to_ms
from redcron.schedule.triggers import next_fire
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core


#: open-breaker index entries a tenant's bounded read looks at (its shard's first)
BREAKER_SCAN = 1_000
#: the tenant of a job named without one (as put and app.job default it)
DEFAULT_TENANT = "default"


def _name_first(
    method: str, name: str, old: tuple[Any, ...], tenant: str
) -> tuple[str, str, tuple[Any, ...]]:
    """(name, tenant, the old call's further arguments) of a JobStore call made
    as ``method(name, tenant=...)``, or in the order the method took before,
    ``method(tenant, name, ...)``: a second positional argument can only be
    that (tenant is keyword-only), so it is read so, with a DeprecationWarning."""
    if not old:
        return name, tenant, ()
    if tenant != DEFAULT_TENANT:
        raise TypeError(f"jobs.{method}(): give the tenant once: {method}(name, tenant=...)")
    warnings.warn(
        f"jobs.{method}(tenant, name) is deprecated: call jobs.{method}(name, tenant=tenant), "
        "the order jobs.put and app.job take",
        DeprecationWarning,
        stacklevel=3,
    )
    return str(old[0]), name, old[1:]


class JobStore:
    """Job and run operations of one broker."""

    def __init__(
        self,
        broker: Core,
        registered: Mapping[str, Mapping[str, Any]] | None = None,
        concurrency: Callable[[JobSpec], Mapping[str, Mapping[str, Any]]] | None = None,
    ) -> None:
        self.broker = broker
        self.keys = broker.keys
        #: registered task name -> its retries, retry_base, retry_cap: what a job's
        #: Python task that leaves them out takes (``model.retry_rule``)
        self.registered = registered or {}
        #: a spec -> its tasks' concurrency key and rate fields (``App.job_concurrency``)
        self.concurrency = concurrency

    # -- jobs -------------------------------------------------------------------

    def put(
        self,
        job: JobSpec | str | Mapping[str, Any],
        /,
        *,
        now: datetime | None = None,
        allow_unregistered: bool = False,
        **fields: Any,
    ) -> JobRecord:
        """Create or update one job now (keyed by tenant + name) and return it.

        ``job`` is a :class:`JobSpec`, a job name followed by the keywords
        ``app.job`` takes (``tasks=``, ``cron=``, ``every=``, ``at=``, ``tz=``,
        ``tenant=``, ``depends_on=`` and any policy), or a mapping in the form
        ``POST /v1/jobs`` and job files take (the design's body verbatim:
        ``{name, cron, task: {image, cmd, cpu, mem}, depends_on, retries,
        timeout_s, tenant}``).  Everything is validated before anything
        is written.  The record's ``change`` is created, updated or unchanged
        (an identical spec writes nothing, so re-applying never resets a
        schedule with fires due).

        A Python task must name a registered task: one the App registers or a
        live worker publishes (:mod:`redcron.engine.registered`); otherwise
        ValidationError (``tasks.<task>.name``) names the closest registered
        names.  ``allow_unregistered=True`` writes it anyway (its workers run
        another app and are not live yet).
        """
        if isinstance(job, Mapping):
            if fields:
                raise ValidationError(
                    sorted(fields)[0], "give a mapping or a job name with keywords, not both"
                )
            specs = parse_jobs(job, "job")
            if len(specs) != 1:
                raise ValidationError("jobs", "put one job at a time (put_many takes several)")
            spec = specs[0]
        elif isinstance(job, JobSpec):
            if fields:
                raise ValidationError(
                    sorted(fields)[0], "give a JobSpec or a job name with keywords, not both"
                )
            spec = job
        else:
            spec = job_spec(job, **fields)
        done = self.put_many([spec], now, allow_unregistered=allow_unregistered)[0]
        return dataclasses.replace(self.get_by_id(done.id), change=done.change)

    def put_many(
        self,
        specs: Sequence[JobSpec],
        now: datetime | None = None,
        progress: Callable[[int, int], None] | None = None,
        *,
        allow_unregistered: bool = False,
    ) -> list[JobChange]:
        """:meth:`put` for many jobs, the bulk path (``jobs apply -f``, benches):
        :func:`redcron.engine.job_writes.put_many`, after the registered-task
        check of :meth:`put` (for the whole batch, before anything is written)."""
        if not allow_unregistered:
            refuse_unregistered(self.broker, specs, self.registered)
        if self.registered:
            specs = [with_registered(spec, self.registered) for spec in specs]
        return put_many(self.broker, specs, now or self.server_now(), progress, self.concurrency)

    def prune(self, tenants: Iterable[str], keep: Iterable[tuple[str, str]]) -> list[JobChange]:
        """Delete every job of ``tenants`` whose (tenant, name) is not in
        ``keep``; jobs of other tenants are never touched.  Returns one
        ``deleted`` change per job removed."""
        kept = set(keep)
        out: list[JobChange] = []
        for tenant in sorted(set(tenants)):
            doomed = [job for job in self.list_jobs(tenant) if (tenant, job.name) not in kept]
            # a job others depend on is deleted after them (job_delete refuses it before)
            while doomed:
                later: list[JobRecord] = []
                refused: Conflict | None = None
                for job in doomed:
                    try:
                        self.delete(job.name, tenant=tenant)
                    except Conflict as exc:
                        later.append(job)
                        refused = exc
                        continue
                    out.append(JobChange(job.id, tenant, job.name, job.version, "deleted"))
                if refused is not None and len(later) == len(doomed):
                    raise refused  # a kept job depends on it: say which
                doomed = later
        return out

    def events(self, count: int = 100, kind: str = "") -> list[Event]:
        """Recent events (circuit breaker opened/closed, dead letters, failed runs...),
        newest first (per shard); ``kind``: only the types that start with it
        (``breaker``), among the newest ``count``."""
        rows: list[Event] = []
        for shard in range(self.broker.shards):
            entries: Any = self.broker.client.xrevrange(self.keys.events(shard), count=count)
            for eid, fields in entries:
                event = Event.from_fields(_s(eid), shard, fields_of(fields))
                if event.type.startswith(kind):
                    rows.append(event)
        return rows

    def server_now(self) -> datetime:
        return from_ms(self.broker.server_ms())

    def tenant_jitter(self, tenant: str) -> float:
        """The tenant's default ``jitter_s`` (0: none), read live from its hash."""
        shard = shard_of(tenant, self.broker.shards)
        return tenant_jitter_s(self.broker.client.hget(self.keys.tenant(shard, tenant), "jitter_s"))

    # A job is named as put() takes it, (name, tenant=...), in every method below
    # (issue 29: get, pause, resume, delete, trigger and job_id took (tenant,
    # name)); the old order still works, with a DeprecationWarning
    # (_name_first): two positional names can only be it, tenant being
    # keyword-only.

    def job_id(self, name: str, *old: str, tenant: str = DEFAULT_TENANT) -> str:
        """The id of the job ``name`` of ``tenant``."""
        name, tenant, _ = _name_first("job_id", name, old, tenant)
        shard = shard_of(tenant, self.broker.shards)
        found = self.broker.client.zrangebylex(
            self.keys.jobidx(shard), *jobidx_range(tenant, name), start=0, num=1
        )
        job = jobidx_parse(_s(found[0])) if found else None
        if job is None:
            raise NotFound(f"no job {name!r} for tenant {tenant!r}")
        return job[2]

    def get(self, name: str, *old: str, tenant: str = DEFAULT_TENANT) -> JobRecord:
        """The job ``name`` of ``tenant``."""
        name, tenant, _ = _name_first("get", name, old, tenant)
        return self.get_by_id(self.job_id(name, tenant=tenant))

    def get_by_id(self, job_id: str) -> JobRecord:
        found = self.get_many([job_id])
        if not found:
            raise NotFound(f"no job {job_id}")
        return found[0]

    def get_many(self, job_ids: Sequence[str]) -> list[JobRecord]:
        """The jobs of ``job_ids`` that exist, in order, in one round trip."""
        if not job_ids:
            return []
        pipe = self.broker.client.pipeline(transaction=False)
        for job_id in job_ids:
            shard = shard_of_id(job_id)
            pipe.hgetall(self.keys.job(shard, job_id))
            pipe.zscore(self.keys.schedule(shard), job_id)
        replies = iter(pipe.execute())
        out = []
        for job_id in job_ids:
            raw, score = next(replies), next(replies)
            if not raw:
                continue  # deleted meanwhile
            # args:<task> fields are msgpack, and the record does not carry them
            fields = fields_of({k: v for k, v in raw.items() if not k.startswith(b"args:")})
            # the lean spec (defaults left out, issue 28) shown in full, as always
            fields["spec"] = spec_text_full(
                _s(fields.get("spec") or ""), _s(fields.get("tenant") or ""),
                _s(fields.get("name") or ""),
            )  # fmt: skip
            record = JobRecord.from_fields(
                fields,
                shard_of_id(job_id),
                None if score is None else int(score),
                job_id,
            )
            out.append(record)
        return out

    def job_names(self, tenant: str | None = None) -> list[tuple[str, str, str]]:
        """(tenant, name, job id) of every job (of ``tenant``), by tenant and name:
        one read of the shard's ``jobidx`` (the tenant's range of it), no job hash
        read (page over these, then ``get_many``)."""
        client = self.broker.client
        if tenant:
            shards = [shard_of(tenant, self.broker.shards)]
            low, high = jobidx_range(tenant)
        else:
            shards, (low, high) = list(range(self.broker.shards)), ("-", "+")
        pipe = client.pipeline(transaction=False)
        for shard in shards:
            pipe.zrangebylex(self.keys.jobidx(shard), low, high)
        out = [job for members in pipe.execute() for m in members if (job := jobidx_parse(_s(m)))]
        return sorted(out)

    def list_jobs(self, tenant: str | None = None) -> list[JobRecord]:
        """Every job (of ``tenant``), by tenant and name."""
        return self.get_many([jid for _t, _name, jid in self.job_names(tenant)])

    def open_breakers(self, tenant: str | None = None, limit: int | None = None) -> list[JobRecord]:
        """Jobs whose circuit breaker is open or in trial (of ``tenant``), from each
        shard's ``attention`` members ``breaker:<job id>``: the cost grows with open
        breakers, not jobs.  ``limit``: at most that many, in job id order (a
        tenant's among the first :data:`BREAKER_SCAN` of its shard): a page's
        bounded read."""
        if tenant:
            shards = [shard_of(tenant, self.broker.shards)]
        else:
            shards = list(range(self.broker.shards))
        low, high = prefix_range(ATTENTION_BREAKER)
        num = -1 if limit is None else (limit if tenant is None else BREAKER_SCAN)
        read = read_shards(
            self.broker,
            shards,
            lambda pipe, shard: pipe.zrangebylex(self.keys.attention(shard), low, high, 0, num),
            "breakers",
        )
        ids = [
            _s(member)[len(ATTENTION_BREAKER) :]
            for (members,) in read.values()
            for member in members
        ]
        found = self.get_many(ids)
        mine = sorted(
            (j for j in found if tenant is None or j.tenant == tenant),
            key=lambda j: (j.tenant, j.name),
        )
        return mine if limit is None else mine[:limit]

    def count_open_breakers(self) -> int:
        """How many breakers are open or in trial (one ZLEXCOUNT per shard)."""
        read = read_shards(
            self.broker,
            range(self.broker.shards),
            lambda pipe, s: pipe.zlexcount(
                self.keys.attention(s), *prefix_range(ATTENTION_BREAKER)
            ),
            "breakers",
        )
        return sum(int(n) for (n,) in read.values())

    def pause(self, name: str, *old: str, tenant: str = DEFAULT_TENANT) -> int:
        """Stop the job ``name`` of ``tenant`` firing (a manual trigger still runs it)."""
        name, tenant, _ = _name_first("pause", name, old, tenant)
        job_id = self.job_id(name, tenant=tenant)
        return int(self._run_job("job_pause", job_id, argv.job_pause(job_id, True)))

    def resume(self, name: str, *old: str, tenant: str = DEFAULT_TENANT) -> int:
        """Let the job ``name`` of ``tenant`` fire again, from its next fire time."""
        name, tenant, _ = _name_first("resume", name, old, tenant)
        job_id = self.job_id(name, tenant=tenant)
        spec = spec_from_json(self.get_by_id(job_id).spec)
        nominal = next_fire(spec.trigger(), self.server_now())
        if nominal is None:
            return int(self._run_job("job_pause", job_id, argv.job_pause(job_id, False)))
        nominal_ms = to_ms(nominal)
        due = due_ms(job_id, spec.jitter_s, nominal_ms, self.tenant_jitter(spec.tenant))
        args = argv.job_pause(job_id, False, nominal_ms, due)
        return int(self._run_job("job_pause", job_id, args))

    def delete(self, name: str, *old: str, tenant: str = DEFAULT_TENANT) -> str:
        """Delete the job ``name`` of ``tenant``; returns its id."""
        name, tenant, _ = _name_first("delete", name, old, tenant)
        shard = shard_of(tenant, self.broker.shards)
        return _s(self.broker._run("job_delete", shard, argv.job_delete(tenant, name)))

    def trigger(
        self,
        name: str,
        *old: Any,
        tenant: str = DEFAULT_TENANT,
        params: dict[str, Any] | None = None,
        now: int | None = None,
    ) -> str:
        """Start a manual run of the job ``name`` of ``tenant`` now; returns its id.

        ``params`` are the run's parameters (JSON); ``now`` (ms) is for tests.
        """
        name, tenant, rest = _name_first("trigger", name, old, tenant)
        if rest:  # trigger(tenant, name, params[, now]), the old order
            params, now = (*rest, now)[:2]
        # a shard whose master is known down fails at once (Core.gated)
        home = shard_of(tenant, self.broker.shards)
        job_id = self.broker.gated([home], "trigger", lambda: self.job_id(name, tenant=tenant))
        run_id = manual_run_id(job_id, ulid())
        # tracing on: the run's tasks join the fire's PRODUCER span (redcron/tracing.py)
        traced = tracing.start_fire(name, tenant, job_id, run_id, "manual")
        manual = argv.FireArgs(
            job_id, "", "", "", None, None, "", "manual", 0, run_id, json.dumps(params or {}),
            *tracing.trace_fields(traced),
        )  # fmt: skip
        unconfirmed: NotReplicated | None = None
        shard = shard_of_id(job_id)
        try:
            status, rid = self.broker.gated(
                [shard], "trigger", lambda: BeatStore(self.broker).fire_one(shard, manual, now)
            )
        except NotReplicated as exc:
            reply: Any = (exc.results or [[b"", run_id.encode()]])[0]
            status, rid, unconfirmed = _s(reply[0]), _s(reply[1]), exc
        finally:
            tracing.end(traced)
        if status == "malformed":
            raise ValidationError(
                "job", f"job {name!r} of tenant {tenant!r} cannot run: {_s(rid)}; put it again"
            )
        if status == RunState.REJECTED:
            raise QuotaExceeded(
                f"tenant {tenant!r} is at its max_queued; run {_s(rid)} was recorded as "
                "rejected (raise the bound with redcron tenants set, or retry later)"
            )
        if unconfirmed is not None:
            # the run was created on the master: name it, so the caller looks it
            # up instead of triggering again (a second run)
            raised = NotReplicated(f"{unconfirmed} (run {rid}: look it up, do not trigger again)")
            raised.run_id, raised.results = _s(rid), unconfirmed.results
            raise raised from unconfirmed
        return _s(rid)

    def _run_job(self, script: str, job_id: str, args: list[Any]) -> Any:
        """Run a script on the shard the job id names."""
        return self.broker._run(script, shard_of_id(job_id), args)

    # -- runs ---------------------------------------------------------------------

    def runs(self, job_id: str, limit: int = 50) -> list[RunRecord]:
        """The job's latest runs, newest first (``tasks`` not read: None)."""
        shard = shard_of_id(job_id)
        ids = self.broker.client.zrevrange(self.keys.runs(shard, job_id), 0, limit - 1)
        pipe = self.broker.client.pipeline(transaction=False)
        for rid in ids:
            pipe.hgetall(self.keys.run(shard, _s(rid)))
        return [
            RunRecord.from_fields(fields_of(raw), run_id=_s(rid))
            for rid, raw in zip(ids, pipe.execute(), strict=True)
            if raw
        ]

    def latest_runs(self, job_ids: Sequence[str]) -> dict[str, RunRecord | None]:
        """Each job's newest run (None: none yet; ``tasks`` not read), for a list of
        jobs: two pipelined round trips for all of them, not two per job."""
        client, keys = self.broker.client, self.keys
        out: dict[str, RunRecord | None] = dict.fromkeys(job_ids)
        if not job_ids:
            return out
        pipe = client.pipeline(transaction=False)
        for jid in job_ids:
            pipe.zrevrange(keys.runs(shard_of_id(jid), jid), 0, 0)
        heads = zip(job_ids, pipe.execute(), strict=True)
        newest = [(jid, _s(ids[0])) for jid, ids in heads if ids]
        if not newest:
            return out
        pipe = client.pipeline(transaction=False)
        for jid, rid in newest:
            pipe.hgetall(keys.run(shard_of_id(jid), rid))
        for (jid, rid), raw in zip(newest, pipe.execute(), strict=True):
            if raw:  # expired between the two reads
                out[jid] = RunRecord.from_fields(fields_of(raw), run_id=rid)
        return out

    def run(self, run_id: str) -> RunRecord:
        """A run with its tasks (state, attempts) in DAG order; a task whose
        record expired with its retention is an :class:`ExpiredTask`."""
        shard = shard_of_id(run_id)
        raw = self.broker.client.hgetall(self.keys.run(shard, run_id))
        if not raw:
            raise NotFound(f"no run {run_id} (never existed, or expired after its retention)")
        fields = fields_of(raw)
        pipe = self.broker.client.pipeline(transaction=False)
        names = [t for t in _s(fields.get("tasks", "")).split(",") if t]
        for t in names:
            pipe.hgetall(self.keys.ti(shard, f"{run_id}/{t}"))
        tasks: list[TaskRecord | ExpiredTask] = []
        for t, ti in zip(names, pipe.execute() if names else [], strict=True):
            if ti:
                iid = f"{run_id}/{t}"
                tasks.append(TaskRecord.from_fields(fields_of(ti, keep=PAYLOADS), shard, iid))
            else:
                tasks.append(ExpiredTask(t))
        return RunRecord.from_fields(fields, tuple(tasks), run_id)

    def cancel_run(self, run_id: str, now: int | None = None) -> RunCancel:
        """End every live task of a run ``cancelled``, and so the run."""
        raw = self.broker._run("run_cancel", shard_of_id(run_id), argv.run_cancel(run_id, now))
        return run_cancel(run_id, raw)

    def retry_run(self, run_id: str, tasks: list[str] | None = None, now: int | None = None) -> int:
        args = argv.run_retry(run_id, tasks or (), now)
        return int(self.broker._run("run_retry", shard_of_id(run_id), args))
