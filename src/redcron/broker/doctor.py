"""Reconciliation (``redcron doctor``): recount what the indexes claim from the
instance hashes, streams, runs and jobs they name, report every disagreement
with the key to look at, and (``repair=True``) fix what is safe to fix.

Each check reads in two steps: discover (SCAN the keys of a kind, or read a
page of an index), then verify in one ``MULTI``/``EXEC`` snapshot per batch,
so a live system moving work between the two reads does not show up as a
finding.  Memory stays bounded: instances, stream entries, leases, timers and
DLQ entries are read in batches of ``BATCH``; what is kept across batches is
per tenant, per (queue, class) and per finding.

Repairs are small Lua scripts (``lua/doctor_*.lua``), each re-checking, inside
the script, the condition the finding was made on before it writes, and each
idempotent: running doctor twice never does anything twice.  None hands out
again work that a worker may be running.  The pure comparisons are module
functions (:func:`instance_problem`, :func:`run_recount`, :func:`run_progress`,
:func:`undelivered`), unit-tested without Redis.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
from redis.commands.core import Script

from redcron.broker.jobs import spec_from_json
from redcron.broker.scripts import full_source
from redcron.keys import GROUP, PRIORITIES
from redcron.model import DoctorReport, DoctorSummary, Finding, TenantRecount
from redcron.model.records import from_ms
from redcron.model.states import RUN_ACTIVE, TASK_LEASED, TASK_TERMINAL, TaskState
from redcron.schedule.jitter import effective_jitter_s, jitter_ms, tenant_jitter_s
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.broker import Broker

log = logging.getLogger(__name__)

#: keys (or index members) read per round trip, and verified per MULTI snapshot
BATCH = 200
SCAN_COUNT = 1000

SCRIPTS = (
    "doctor_entries",
    "doctor_leases",
    "doctor_timers",
    "doctor_dlq",
    "doctor_place",
    "doctor_ring",
    "doctor_unpark",
    "doctor_schedule",
    "doctor_reaper",
    "doctor_run",
)

#: what an instance hash is read for
FIELDS = (
    "state",
    "loc",
    "queue",
    "tenant",
    "priority",
    "lease_entry",
    "deadline",
    "run",
    "due",
    "worker",
)

_STATES = frozenset(s.value for s in TaskState)
_TIMER_STATES = frozenset({TaskState.SCHEDULED.value, TaskState.RETRY_WAIT.value})
_LEASED = frozenset(s.value for s in TASK_LEASED)
_TERMINAL = frozenset(s.value for s in TASK_TERMINAL)
_RUN_ACTIVE = frozenset(s.value for s in RUN_ACTIVE)
#: states in which a run's task is somewhere work moves on from
_LIVE = frozenset({"ready", "leased", "running", "scheduled", "retry_wait", "held"})


# -- pure comparisons -----------------------------------------------------------------


def _id(eid: str) -> tuple[int, int]:
    ms, _, seq = eid.partition("-")
    return int(ms), int(seq or 0)


def undelivered(eid: str, last_delivered: str) -> bool:
    """Is stream entry ``eid`` after the group's last-delivered id (ready, not leased)?"""
    return _id(eid) > _id(last_delivered)


def instance_problem(fields: Mapping[str, str]) -> str | None:
    """Why an instance hash cannot be placed (a sentence), or None when it can.

    A hash with no ``state``, a state that is not a :class:`TaskState`, or a
    live instance without its routing (``queue``, ``tenant``, a ``priority``
    class) is malformed: no script can move it, and doctor cannot tell where
    it belongs."""
    state = fields.get("state") or ""
    if not state:
        return "has no state field"
    if state not in _STATES:
        return f"has state {state!r}, which is not a task state"
    if state in _TERMINAL and state != "dead":
        return None
    missing = [f for f in ("queue", "tenant", "priority") if not fields.get(f)]
    if missing:
        return f"is {state} but has no {', '.join(missing)}"
    if fields["priority"] not in PRIORITIES:
        return (
            f"is {state} with priority {fields['priority']!r}, not one of {', '.join(PRIORITIES)}"
        )
    if state in _LEASED and not fields.get("deadline"):
        return f"is {state} but has no lease deadline"
    return None


@dataclass(frozen=True, slots=True)
class RunCounts:
    """A run's counters as its task states say they should be."""

    total: int
    n_done: int
    n_succeeded: int
    n_failed: int
    n_cancelled: int


def run_recount(states: Sequence[str]) -> RunCounts:
    """Recount a run from its tasks' states, as ``lib/runs.lua`` counts them:
    a dead or upstream-failed task is failed, a cancelled one cancelled."""
    ok = sum(1 for s in states if s == "succeeded")
    failed = sum(1 for s in states if s in ("dead", "failed", "upstream_failed"))
    cancelled = sum(1 for s in states if s in ("cancelled", "skipped"))
    return RunCounts(len(states), ok + failed + cancelled, ok, failed, cancelled)


def run_progress(tasks: Mapping[str, tuple[str, Sequence[str]]]) -> tuple[bool, list[str]]:
    """Can an active run move on?  ``tasks``: name -> (state, dependencies).

    Returns (can progress, pending tasks whose dependencies all succeeded but
    that were never made ready: the fan-in that did not happen).  A run moves
    on while a task is somewhere work moves from (ready, leased, waiting on a
    timer, held) or a pending task may still get its dependencies."""
    fanin: list[str] = []
    can = False
    for name, (state, deps) in tasks.items():
        if state in _LIVE:
            can = True
        elif state == "pending":
            dep_states = [tasks[d][0] if d in tasks else "" for d in deps]
            if all(s == "succeeded" for s in dep_states):
                fanin.append(name)
            elif all(s == "succeeded" or s in _LIVE or s == "pending" for s in dep_states):
                can = True
    return can and not fanin, fanin


def _owns(f: Mapping[str, str], eid: str, delivered: bool) -> bool:
    """Does the instance (hash ``f``) own stream entry ``eid``: leased on it when
    the entry is delivered, ready at it when not?"""
    if delivered:
        return f.get("state", "") in _LEASED and f.get("lease_entry") == eid
    return f.get("state") == "ready" and f.get("loc") == "q:" + eid


def glob_escape(text: str) -> str:
    """``text`` matched literally by a SCAN MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


# -- the examination ---------------------------------------------------------------------


Fix = Callable[[], tuple[bool, str]]
#: a command for :meth:`_Examiner.tx`: a pipeline method name and its arguments
Cmd = tuple[Any, ...]


@dataclass
class _Found:
    finding: Finding
    fix: Fix | None = None


@dataclass
class _Tenant:
    in_flight: int = 0
    in_flight_recount: int = 0
    queued: int = 0
    queued_recount: int = 0
    ready: int = 0
    dlq: int = 0


@dataclass
class _Counts:
    instances: int = 0
    streams: int = 0
    stream_entries: int = 0
    leases: int = 0
    timers: int = 0
    dlq_entries: int = 0
    dlq_expired: int = 0
    jobs: int = 0
    schedule_entries: int = 0
    runs_active: int = 0


def examine(
    broker: Broker,
    now_ms: int | None = None,
    repair: bool = False,
    progress: Callable[[str], None] | None = None,
) -> DoctorReport:
    """Check every shard; with ``repair``, fix what is safe (see the module doc).

    ``now_ms`` (tests) replaces the server clock for deciding whether a lease
    has expired, and is passed to the repair scripts; production leaves it None.
    ``progress`` is called with a short line now and then (the CLI prints it
    on stderr).
    """
    return _Examiner(broker, now_ms, progress).run(repair)


class _Examiner:
    def __init__(
        self, broker: Broker, now_ms: int | None, progress: Callable[[str], None] | None
    ) -> None:
        self.b = broker
        self.r = broker.client
        self.k = broker.keys
        self.override = now_ms
        self.now = now_ms if now_ms is not None else broker.server_ms()
        self.say = progress or (lambda _line: None)
        self.found: list[_Found] = []
        self.counts = _Counts()
        self.tenants: dict[tuple[int, str], _Tenant] = {}
        self.scripts: dict[str, Script] = {
            n: self.r.register_script(full_source(n)) for n in SCRIPTS
        }

    # -- plumbing -------------------------------------------------------------------

    def call(self, name: str, shard: int, args: Sequence[Any], *keys: str) -> Any:
        return self.scripts[name]([self.k.shard(shard), *keys], list(args))

    def now_arg(self) -> str:
        return "" if self.override is None else str(self.override)

    def add(self, kind: str, shard: int, key: str, detail: str, fix: Fix | None = None) -> None:
        self.found.append(_Found(Finding(kind, shard, key, detail, fix is not None), fix))

    def tenant(self, shard: int, tenant: str) -> _Tenant:
        return self.tenants.setdefault((shard, tenant), _Tenant())

    def scan(self, shard: int, kind: str) -> Iterator[list[str]]:
        """Batches of the shard's keys ``<shard prefix><kind>:*``."""
        pattern = glob_escape(self.k.shard(shard) + kind + ":") + "*"
        batch: list[str] = []
        for key in self.r.scan_iter(match=pattern, count=SCAN_COUNT):
            batch.append(_s(key))
            if len(batch) >= BATCH:
                yield batch
                batch = []
        if batch:
            yield batch

    def tx(self, cmds: Sequence[Cmd]) -> list[Any]:
        """Run ``(method, *args)`` commands as one MULTI/EXEC (a consistent view)."""
        if not cmds:
            return []
        pipe = self.r.pipeline(transaction=True)
        for name, *args in cmds:
            getattr(pipe, name)(*args)
        return list(pipe.execute(raise_on_error=False))

    def snapshot(self, build: Callable[[Any], object]) -> list[Any]:
        """Run the commands ``build`` queues as one MULTI/EXEC (a consistent view)."""
        pipe = self.r.pipeline(transaction=True)
        build(pipe)
        return list(pipe.execute(raise_on_error=False))

    def zpages(self, key: str) -> Iterator[list[tuple[str, float]]]:
        start = 0
        while True:
            page: Any = self.r.zrange(key, start, start + BATCH - 1, withscores=True)
            if not page:
                return
            yield [(_s(m), float(sc)) for m, sc in page]
            if len(page) < BATCH:
                return
            start += BATCH

    # -- the run ---------------------------------------------------------------------

    def run(self, repair: bool) -> DoctorReport:
        shards = self.b.shards
        for shard in range(shards):
            self.say(f"shard {shard}: instances")
            tenants, queues = self.check_instances(shard)
            tenants |= {_s(t) for t in self.r.smembers(self.k.tenants(shard))}
            queues |= {_s(q) for q in self.r.smembers(self.k.queues(shard))}
            # streams written by hand or under names no set lists (names hold no ':')
            head = self.k.shard(shard) + "q:"
            for keys in self.scan(shard, "q"):
                for key in keys:
                    parts = key[len(head) :].split(":")
                    if len(parts) == 3 and parts[2] in PRIORITIES:
                        queues.add(parts[0])
                        tenants.add(parts[1])
            self.say(f"shard {shard}: streams of {len(tenants)} tenants, {len(queues)} queues")
            ready = self.check_streams(shard, sorted(tenants), sorted(queues))
            self.say(f"shard {shard}: leases, timers, DLQ")
            self.check_leases(shard, sorted(tenants))
            self.check_timers(shard)
            self.check_dlq(shard, sorted(tenants))
            self.say(f"shard {shard}: rings")
            self.check_rings(shard, sorted(tenants), sorted(queues), ready)
            self.say(f"shard {shard}: jobs and schedule")
            self.check_jobs(shard)
            self.say(f"shard {shard}: runs")
            self.check_runs(shard)
        findings: list[Finding] = []
        for f in self.found:
            finding = f.finding
            if repair and f.fix is not None:
                try:
                    done, action = f.fix()
                except (redis.RedisError, ValueError) as exc:  # report it, go on with the rest
                    done, action = False, f"repair failed: {exc}"
                finding = Finding(**{**_asdict(finding), "repaired": done, "action": action})
            findings.append(finding)
        if repair and self.found:
            self.say(f"repaired {sum(1 for f in findings if f.repaired)} of {len(findings)}")
        repaired = sum(1 for f in findings if f.repaired)
        c = self.counts
        summary = DoctorSummary(
            instances=c.instances,
            streams=c.streams,
            stream_entries=c.stream_entries,
            leases=c.leases,
            timers=c.timers,
            dlq_entries=c.dlq_entries,
            dlq_expired=c.dlq_expired,
            jobs=c.jobs,
            schedule_entries=c.schedule_entries,
            runs_active=c.runs_active,
            findings=len(findings),
            repaired=repaired,
            remaining=len(findings) - repaired,
        )
        recounts = tuple(
            TenantRecount(
                tenant,
                shard,
                t.in_flight,
                t.in_flight_recount,
                t.queued,
                t.queued_recount,
                t.ready,
                t.dlq,
            )
            for (shard, tenant), t in sorted(self.tenants.items())
        )
        return DoctorReport(
            checked_at=from_ms(self.now),
            repair=repair,
            shards=shards,
            findings=tuple(findings),
            tenants=recounts,
            summary=summary,
        )

    # -- instances: each in the place its hash records ----------------------------------

    def check_instances(self, shard: int) -> tuple[set[str], set[str]]:
        tenants: set[str] = set()
        queues: set[str] = set()
        head = self.k.ti(shard, "")
        for keys in self.scan(shard, "ti"):
            snap = self.tx([("hmget", key, FIELDS) for key in keys])
            hashes = []
            for key, values in zip(keys, snap, strict=True):
                if isinstance(values, Exception) or all(v is None for v in values):
                    if isinstance(values, Exception):  # not a hash: written by hand
                        self.add(
                            "instance_malformed",
                            shard,
                            key,
                            f"{key} is not a hash ({values}); nothing can move it.",
                        )
                    continue
                fields = {n: _s(v) for n, v in zip(FIELDS, values, strict=True) if v is not None}
                hashes.append((key, key[len(head) :], fields))
            self.counts.instances += len(hashes)
            for _key, _iid, f in hashes:
                if f.get("tenant"):
                    tenants.add(f["tenant"])
                if f.get("queue"):
                    queues.add(f["queue"])
            self._place_batch(shard, hashes)
        return tenants, queues

    def _place_batch(self, shard: int, hashes: list[tuple[str, str, dict[str, str]]]) -> None:
        """Verify each instance is where its hash says, in one snapshot (re-reading
        the hash in it, so what moved since the discovery read is judged afresh)."""
        k = self.k

        def build(p: Any) -> None:
            for key, iid, f in hashes:
                p.hmget(key, FIELDS)
                state, loc = f.get("state", ""), f.get("loc", "")
                q, t, pr = f.get("queue", ""), f.get("tenant", ""), f.get("priority", "")
                stream = k.q(shard, q, t, pr)
                if state == "ready":
                    eid = loc[2:] if loc.startswith("q:") else "0-0"
                    p.xrange(stream, eid, eid)
                    p.xpending_range(stream, GROUP, eid, eid, 1)
                elif state in _TIMER_STATES:
                    p.zscore(k.timers(shard), iid)
                elif state in _LEASED:
                    eid = f.get("lease_entry") or "0-0"
                    p.zscore(k.tleases(shard, t), iid)
                    p.xrange(stream, eid, eid)
                    p.xpending_range(stream, GROUP, eid, eid, 1)
                elif state == "dead":
                    eid = loc[4:] if loc.startswith("dlq:") else "0-0"
                    p.xrange(k.dlq(shard, t), eid, eid)
                elif state == "held":
                    p.lpos(k.held(shard, f.get("run", "").partition("@")[0]), iid)
                elif state == "pending":
                    p.hget(k.run(shard, f.get("run", "")), "state")

        replies = iter(self.snapshot(build))
        for key, iid, first in hashes:
            values = next(replies)
            state = first.get("state", "")
            n_lookups = {"ready": 2, "leased": 3, "running": 3, "dead": 1, "held": 1, "pending": 1}
            n = 1 if state in _TIMER_STATES else n_lookups.get(state, 0)
            got = [next(replies) for _ in range(n)]
            if isinstance(values, Exception) or all(v is None for v in values):
                continue  # expired meanwhile
            f = {nm: _s(v) for nm, v in zip(FIELDS, values, strict=True) if v is not None}
            if f.get("state", "") != state or f.get("loc") != first.get("loc"):
                continue  # moved meanwhile: the next run of doctor judges it
            self._judge(shard, key, iid, f, got)

    def _judge(self, shard: int, key: str, iid: str, f: dict[str, str], got: list[Any]) -> None:
        why = instance_problem(f)
        if why is not None:
            self.add(
                "instance_malformed",
                shard,
                key,
                f"Instance {iid} {why}; no script can move it: fix or delete the hash "
                "by hand (HGETALL it first).",
            )
            return
        state, loc = f["state"], f.get("loc", "")
        if state in _TERMINAL and state != "dead":
            return
        tenant, queue, pr = f["tenant"], f["queue"], f["priority"]
        stream = self.k.q(shard, queue, tenant, pr)
        t = self.tenant(shard, tenant)
        place = self._fix_place(shard, iid)
        if state == "ready":
            t.ready += 1
            entry, pending = got
            names_me = bool(entry) and _s(entry[0][1].get(b"i", b"")) == iid
            if not names_me:
                self.add(
                    "ready_not_in_stream",
                    shard,
                    key,
                    f"Instance {iid} is ready but no entry of {stream} names it (loc "
                    f"{loc!r}): no worker can ever lease it. Repair adds it to the "
                    "stream again.",
                    place,
                )
            elif pending:
                self.add(
                    "ready_entry_delivered",
                    shard,
                    key,
                    f"Instance {iid} is ready but its entry {loc[2:]} of {stream} was "
                    "delivered (is pending) with no lease: the reaper drops that entry; "
                    "run doctor again afterwards to requeue it.",
                )
        elif state in _TIMER_STATES:
            (score,) = got
            if score is None:
                self.add(
                    "timer_missing",
                    shard,
                    key,
                    f"Instance {iid} is {state} but has no entry in "
                    f"{self.k.timers(shard)}: it would wait forever. Repair sets its timer "
                    f"at its due time ({f.get('due') or 'now'}).",
                    place,
                )
        elif state in _LEASED:
            t.in_flight_recount += 1
            score, entry, pending = got
            eid = f.get("lease_entry", "")
            tracked = bool(entry) and _s(entry[0][1].get(b"i", b"")) == iid and bool(pending)
            deadline = int(float(f.get("deadline") or 0))
            if not tracked:
                expired = deadline <= self.now
                self.add(
                    "lease_entry_missing",
                    shard,
                    key,
                    f"Instance {iid} is {state} (worker {f.get('worker', '?')}) but its "
                    f"lease entry {eid or '(none)'} is not pending in {stream}: the "
                    "reaper can never see this lease. "
                    + (
                        "Its deadline has passed: repair ends the attempt as the reaper "
                        "would (retry or DLQ)."
                        if expired
                        else "Its deadline is still ahead: the worker may still report; run "
                        "doctor again after the deadline."
                    ),
                    place if expired else None,
                )
            elif score is None:
                self.add(
                    "lease_missing",
                    shard,
                    key,
                    f"Instance {iid} holds a lease but is not in "
                    f"{self.k.tleases(shard, tenant)}: tenant {tenant}'s cap undercounts "
                    "its in-flight work. Repair adds it at its deadline.",
                    place,
                )
        elif state == "dead":
            t_dlq = self.k.dlq(shard, tenant)
            (entry,) = got
            if not entry or _s(entry[0][1].get(b"i", b"")) != iid:
                self.add(
                    "dlq_entry_missing",
                    shard,
                    key,
                    f"Instance {iid} is dead but {t_dlq} has no entry {loc[4:] or '?'} "
                    "for it: dlq list cannot show it. Repair writes a new DLQ entry.",
                    place,
                )
        elif state == "held":
            (pos,) = got
            if pos is None:
                job = f.get("run", "").partition("@")[0]
                self.add(
                    "held_missing",
                    shard,
                    key,
                    f"Instance {iid} is held but not in {self.k.held(shard, job)}: "
                    "closing the breaker would never release it. Repair appends it.",
                    place,
                )
        elif state == "pending":
            (run_state,) = got
            if run_state is None or _s(run_state) not in _RUN_ACTIVE:
                self.add(
                    "pending_without_run",
                    shard,
                    key,
                    f"Instance {iid} is pending but its run {f.get('run') or '?'} is "
                    f"{'gone' if run_state is None else _s(run_state)}: it can never "
                    "become ready. Cancel it (redcron task cancel) or delete the hash.",
                )

    def _fix_place(self, shard: int, iid: str) -> Fix:
        def fix() -> tuple[bool, str]:
            word = _s(self.call("doctor_place", shard, [iid, self.now_arg(), random.random()]))
            return word not in ("entry_pending", "lease_live", "missing"), _PLACE_WORDS.get(
                word.partition(":")[0], word
            ) + (f" (now {word.partition(':')[2]})" if ":" in word else "")

        return fix

    # -- streams: every entry owned, pending entries leased, the reaper's index -----

    def check_streams(
        self, shard: int, tenants: list[str], queues: list[str]
    ) -> dict[tuple[str, str, str], int]:
        """Returns (tenant, queue, class) -> ready count (length - pending) of each stream."""
        grid = [(t, q, p) for t in tenants for q in queues for p in PRIORITIES]
        ready: dict[tuple[str, str, str], int] = {}
        for i in range(0, len(grid), BATCH):
            chunk = grid[i : i + BATCH]
            pipe = self.r.pipeline(transaction=False)
            for t, q, p in chunk:
                pipe.xinfo_groups(self.k.q(shard, q, t, p))
            for (t, q, p), groups in zip(chunk, pipe.execute(raise_on_error=False), strict=True):
                if isinstance(groups, Exception):
                    continue  # no such stream
                group = next((g for g in groups if _s(g["name"]) == GROUP), None)
                ready[(t, q, p)] = self._stream(shard, t, q, p, group)
        return ready

    def _stream(self, shard: int, tenant: str, queue: str, pr: str, group: Any) -> int:
        k, stream = self.k, self.k.q(shard, queue, tenant, pr)
        self.counts.streams += 1
        length = int(self.r.xlen(stream))
        self.counts.stream_entries += length
        if group is None:
            self.add(
                "stream_without_group",
                shard,
                stream,
                f"Stream {stream} has no consumer group {GROUP!r}: lease cannot read it. "
                f"Create it by hand: XGROUP CREATE {stream} {GROUP} 0.",
            )
            return 0
        last = _s(group["last-delivered-id"])
        n_pending = int(group["pending"])
        t = self.tenant(shard, tenant)
        # undelivered entries: each owned by an instance ready with loc q:<id>
        after = last
        while True:
            page: Any = self.r.xrange(stream, "(" + after, "+", count=BATCH)
            if not page:
                break
            after = _s(page[-1][0])
            t.queued += len(page)
            bad = self._unowned(shard, stream, page, delivered=False)
            t.queued_recount += len(page) - len(bad)
            for eid, iid, why in bad:
                self.add(
                    "stream_entry_orphan",
                    shard,
                    stream,
                    f"Entry {eid} of {stream} (instance {iid}) is ready but {why}: lease "
                    "would discard it; it inflates the tenant's ready count. Repair "
                    "deletes it.",
                    self._fix_entries(shard, stream, eid),
                )
            if len(page) < BATCH:
                break
        # pending entries: each held by an instance leased on it
        low = "-"
        while n_pending:
            rows = self.r.xpending_range(stream, GROUP, low, "+", BATCH)
            if not rows:
                break
            ids = [_s(row["message_id"]) for row in rows]
            low = "(" + ids[-1]
            entries = []
            for eid in ids:
                found: Any = self.r.xrange(stream, eid, eid)
                entries.append(found[0] if found else (eid.encode(), {}))
            for eid, _iid, why in self._unowned(shard, stream, entries, delivered=True):
                self.add(
                    "pending_entry_orphan",
                    shard,
                    stream,
                    f"Entry {eid} of {stream} is pending (leased) but {why}: no lease "
                    "holds it. Repair acknowledges and deletes it (as the reaper "
                    "would).",
                    self._fix_entries(shard, stream, eid),
                )
            if len(rows) < BATCH:
                break
        if n_pending and self.r.zscore(k.pending(shard), stream) is None:
            self.add(
                "reaper_index_missing",
                shard,
                k.pending(shard),
                f"{stream} has {n_pending} pending entries but is not in the reaper's "
                "index: its expired leases would never be reaped. Repair indexes it, "
                "due now.",
                lambda: (
                    True,
                    "indexed, due now"
                    if self.call("doctor_reaper", shard, [], stream)
                    else "already indexed, or nothing pending any more: left",
                ),
            )
        return length - n_pending

    def _unowned(
        self, shard: int, stream: str, entries: Sequence[Any], delivered: bool
    ) -> list[tuple[str, str, str]]:
        """(entry id, instance id, why) of the entries no instance owns, judged on
        a snapshot that re-reads each entry and its instance."""
        ids = [_s(e[0]) for e in entries]

        def build(p: Any) -> None:
            for eid, (_e, fields) in zip(ids, entries, strict=True):
                p.xrange(stream, eid, eid)
                p.xpending_range(stream, GROUP, eid, eid, 1)
                p.hmget(self.k.ti(shard, _s(fields.get(b"i", b""))), FIELDS)

        replies = iter(self.snapshot(build))
        out = []
        for eid in ids:
            entry, pending, values = next(replies), next(replies), next(replies)
            if not entry or bool(pending) != delivered:
                continue  # gone or moved meanwhile
            iid = _s(entry[0][1].get(b"i", b""))
            f = {n: _s(v) for n, v in zip(FIELDS, values, strict=True) if v is not None}
            state = f.get("state")
            same = self.k.q(shard, f.get("queue", ""), f.get("tenant", ""), f.get("priority", ""))
            if not state:
                why = "its instance is gone"
            elif same != stream:
                why = f"its instance belongs to another stream ({same})"
            elif _owns(f, eid, delivered):
                continue
            elif delivered:
                why = f"its instance is {state} (lease entry {f.get('lease_entry') or 'none'})"
            else:
                why = f"its instance is {state} at {f.get('loc') or 'no place'}"
            out.append((eid, iid, why))
        return out

    def _fix_entries(self, shard: int, stream: str, eid: str) -> Fix:
        def fix() -> tuple[bool, str]:
            dropped, _kept = self.call("doctor_entries", shard, [eid], stream)
            return True, (
                "acknowledged and deleted the entry"
                if dropped
                else "an instance owns it on re-check: left"
            )

        return fix

    # -- leases, timers, DLQ: every member names an instance in that place ------------

    def check_leases(self, shard: int, tenants: list[str]) -> None:
        for tenant in tenants:
            key = self.k.tleases(shard, tenant)
            t = self.tenant(shard, tenant)
            for page in self.zpages(key):
                t.in_flight += len(page)
                self.counts.leases += len(page)
                cmds: list[Cmd] = []
                for m, _sc in page:
                    cmds += [
                        ("zscore", key, m),
                        ("hmget", self.k.ti(shard, m), ["state", "tenant"]),
                    ]
                snap = self.tx(cmds)
                for (iid, _sc), score, (state, owner) in zip(
                    page, snap[::2], snap[1::2], strict=True
                ):
                    if score is None:
                        continue
                    st = _s(state) if state else None
                    if st in _LEASED and _s(owner or b"") == tenant:
                        continue
                    what = (
                        "gone"
                        if st is None
                        else (st if st not in _LEASED else f"leased by tenant {_s(owner or b'')}")
                    )
                    self.add(
                        "lease_orphan",
                        shard,
                        key,
                        f"{key} counts a lease on {iid}, which is {what}: tenant "
                        f"{tenant}'s cap counts a lease nobody holds. Repair removes it "
                        "(and gives the tenant its rings back).",
                        self._fix_members("doctor_leases", shard, [tenant, iid]),
                    )

    def check_timers(self, shard: int) -> None:
        key = self.k.timers(shard)
        for page in self.zpages(key):
            ids = [m for m, _sc in page if not m.startswith(("park:", "brk:"))]
            self.counts.timers += len(ids)
            cmds: list[Cmd] = []
            for m in ids:
                cmds += [("zscore", key, m), ("hget", self.k.ti(shard, m), "state")]
            snap = self.tx(cmds)
            for iid, score, state in zip(ids, snap[::2], snap[1::2], strict=True):
                if score is None or (state and _s(state) in _TIMER_STATES):
                    continue
                what = "gone" if not state else _s(state)
                self.add(
                    "timer_orphan",
                    shard,
                    key,
                    f"{key} has a timer for {iid}, which is {what}: nothing waits on it. "
                    "Repair removes it.",
                    self._fix_members("doctor_timers", shard, [iid]),
                )

    def check_dlq(self, shard: int, tenants: list[str]) -> None:
        for tenant in tenants:
            key = self.k.dlq(shard, tenant)
            t = self.tenant(shard, tenant)
            after = "-"
            while True:
                page: Any = self.r.xrange(key, after, "+", count=BATCH)
                if not page:
                    break
                after = "(" + _s(page[-1][0])
                t.dlq += len(page)
                self.counts.dlq_entries += len(page)
                snap = self.tx(
                    [
                        ("hmget", self.k.ti(shard, _s(fields.get(b"i", b""))), ["state", "loc"])
                        for _e, fields in page
                    ]
                )
                for (eid, fields), (state, loc) in zip(page, snap, strict=True):
                    eid, iid = _s(eid), _s(fields.get(b"i", b""))
                    if state is None:
                        self.counts.dlq_expired += 1
                        self.add(
                            "dlq_entry_orphan",
                            shard,
                            key,
                            f"DLQ entry {eid} of {key} names {iid}, which is gone (expired "
                            "or deleted): replay and discard cannot act on it. Repair "
                            "deletes the entry (dlq list drops it too).",
                            self._fix_members("doctor_dlq", shard, [tenant, eid]),
                        )
                    elif _s(state) != "dead" or _s(loc or b"") != "dlq:" + eid:
                        self.add(
                            "dlq_entry_orphan",
                            shard,
                            key,
                            f"DLQ entry {eid} of {key} names {iid}, which is "
                            f"{_s(state)} at {_s(loc or b'') or 'no place'}: replaying "
                            "this entry would do nothing. Repair deletes the entry.",
                            self._fix_members("doctor_dlq", shard, [tenant, eid]),
                        )
                if len(page) < BATCH:
                    break

    def _fix_members(self, script: str, shard: int, args: list[str]) -> Fix:
        def fix() -> tuple[bool, str]:
            removed, _kept = self.call(script, shard, args)
            return True, "removed" if removed else "valid on re-check: left"

        return fix

    # -- rings, aging index, parked tenants ---------------------------------------

    def check_rings(
        self,
        shard: int,
        tenants: list[str],
        queues: list[str],
        ready: dict[tuple[str, str, str], int],
    ) -> None:
        k = self.k
        for queue in queues:
            for pr in PRIORITIES:
                ring, oldest = k.ring(shard, queue, pr), k.oldest(shard, queue, pr)
                on = {_s(m) for m in self.r.zrange(ring, 0, -1)}
                aged = {_s(m) for m in self.r.zrange(oldest, 0, -1)}
                for tenant in sorted(set(tenants) | on | aged):
                    n = ready.get((tenant, queue, pr), 0)
                    parked = bool(self.r.sismember(k.parked(shard, tenant), f"{queue}|{pr}"))
                    fix = self._fix_ring(shard, queue, pr, tenant)
                    stream = k.q(shard, queue, tenant, pr)
                    if n > 0 and tenant not in on and not parked:
                        self.add(
                            "ring_member_missing",
                            shard,
                            ring,
                            f"Tenant {tenant} has {n} ready in {stream} but is neither on "
                            f"{ring} nor parked: no worker will ever lease that work. "
                            "Repair puts it on the ring.",
                            fix,
                        )
                    elif n > 0 and tenant in on and tenant not in aged:
                        self.add(
                            "aging_entry_missing",
                            shard,
                            oldest,
                            f"Tenant {tenant} has ready work in {stream} but no entry in "
                            f"{oldest}: aging never raises it. Repair records its oldest "
                            "ready entry.",
                            fix,
                        )
                    elif n <= 0 and tenant in on:
                        self.add(
                            "ring_member_idle",
                            shard,
                            ring,
                            f"Tenant {tenant} is on {ring} with nothing ready in {stream}: "
                            "every lease visits it for nothing. Repair takes it off.",
                            fix,
                        )
                    elif tenant in aged and tenant not in on and not (n > 0 and parked):
                        self.add(
                            "aging_entry_stale",
                            shard,
                            oldest,
                            f"Tenant {tenant} is in {oldest} but not on {ring}: its old "
                            "entry may raise nothing or hide other tenants' aged work. "
                            "Repair drops the entry.",
                            fix,
                        )
        for tenant in tenants:
            pk = k.parked(shard, tenant)
            members = self.r.smembers(pk)
            if not members:
                continue
            cap = self.r.hget(k.tenant(shard, tenant), "max_in_flight")
            cap_n = int(float(cap)) if cap and _s(cap).replace(".", "", 1).isdigit() else 0
            held = int(self.r.zcard(k.tleases(shard, tenant)))
            timer = self.r.zscore(k.timers(shard), f"park:{tenant}")
            if (cap_n <= 0 or held < cap_n) and timer is None:
                self.add(
                    "tenant_parked_stuck",
                    shard,
                    pk,
                    f"Tenant {tenant} is parked off {len(members)} ring(s) but holds "
                    f"{held} lease(s) (cap {cap_n or 'none'}) and waits for no rate "
                    "token: nothing will ever unpark it. Repair unparks it.",
                    self._fix_unpark(shard, tenant),
                )

    def _fix_unpark(self, shard: int, tenant: str) -> Fix:
        def fix() -> tuple[bool, str]:
            done = self.call("doctor_unpark", shard, [tenant])
            return True, "unparked" if done else "no longer stuck on re-check: left"

        return fix

    def _fix_ring(self, shard: int, queue: str, pr: str, tenant: str) -> Fix:
        def fix() -> tuple[bool, str]:
            (word,) = self.call("doctor_ring", shard, [queue, pr, tenant])
            return True, _RING_WORDS.get(_s(word), _s(word))

        return fix

    # -- jobs and the schedule ----------------------------------------------------------

    def check_jobs(self, shard: int) -> None:
        k, sk = self.k, self.k.schedule(shard)
        head = k.job(shard, "")
        fields = ["id", "tenant", "paused", "next_fire", "spec"]
        for keys in self.scan(shard, "job"):
            cmds: list[Cmd] = []
            for key in keys:
                cmds += [("hmget", key, fields), ("zscore", sk, key[len(head) :])]
            snap = self.tx(cmds)
            for key, values, score in zip(keys, snap[::2], snap[1::2], strict=True):
                if isinstance(values, Exception) or values[0] is None:
                    continue
                self.counts.jobs += 1
                job_id, tenant, paused, nxt, spec = (_s(v) if v else "" for v in values)
                if paused != "1" and nxt and score is None:
                    self.add(
                        "schedule_entry_missing",
                        shard,
                        sk,
                        f"Job {job_id} ({key}) is active with its next fire at {nxt} ms "
                        f"but is not in {sk}: it will never fire again. Repair schedules "
                        "it at that fire (plus its jitter).",
                        self._fix_schedule(shard, job_id, tenant, nxt, spec),
                    )
                elif paused == "1" and score is not None:
                    self.add(
                        "schedule_entry_paused",
                        shard,
                        sk,
                        f"Job {job_id} ({key}) is paused but still in {sk}. Repair takes "
                        "it off the schedule.",
                        self._fix_schedule(shard, job_id, tenant, "", ""),
                    )
        for page in self.zpages(sk):
            self.counts.schedule_entries += len(page)
            cmds = []
            for m, _sc in page:
                cmds += [("zscore", sk, m), ("exists", k.job(shard, m))]
            snap = self.tx(cmds)
            for (job_id, _sc), score, exists in zip(page, snap[::2], snap[1::2], strict=True):
                if score is not None and not exists:
                    self.add(
                        "schedule_entry_orphan",
                        shard,
                        sk,
                        f"{sk} schedules job {job_id}, which does not exist "
                        f"({k.job(shard, job_id)}): the beat would try it at every "
                        "pass. Repair removes the entry.",
                        self._fix_schedule(shard, job_id, "", "", ""),
                    )

    def _fix_schedule(self, shard: int, job_id: str, tenant: str, nxt: str, spec: str) -> Fix:
        def fix() -> tuple[bool, str]:
            due: Any = ""
            if nxt:
                jitter = effective_jitter_s(
                    spec_from_json(spec),
                    tenant_jitter_s(self.r.hget(self.k.tenant(shard, tenant), "jitter_s")),
                )
                nominal = int(nxt)
                due = nominal + jitter_ms(job_id, nominal, jitter)
            word = _s(self.call("doctor_schedule", shard, [job_id, nxt, due]))
            return word != "changed", _SCHEDULE_WORDS.get(word, word)

        return fix

    # -- runs -------------------------------------------------------------------------

    def check_runs(self, shard: int) -> None:
        k = self.k
        head_active = k.active(shard, "")
        for keys in self.scan(shard, "active"):
            for key in keys:
                job_id = key[len(head_active) :]
                members = [_s(m) for m in self.r.smembers(key)]
                cmds: list[Cmd] = []
                for m in members:
                    cmds += [("sismember", key, m), ("hget", k.run(shard, m), "state")]
                snap = self.tx(cmds)
                for rid, member, state in zip(members, snap[::2], snap[1::2], strict=True):
                    if member and (state is None or _s(state) not in _RUN_ACTIVE):
                        what = "gone" if state is None else _s(state)
                        self.add(
                            "active_run_ended",
                            shard,
                            key,
                            f"{key} lists run {rid}, which is {what}: the job's overlap "
                            f"policy (skip, buffer_one) holds back every fire of {job_id}."
                            " Repair removes it.",
                            self._fix_run(shard, rid),
                        )
        head_run = k.run(shard, "")
        fields = [
            "state",
            "job",
            "tasks",
            "total",
            "n_done",
            "n_succeeded",
            "n_failed",
            "n_cancelled",
        ]
        for keys in self.scan(shard, "run"):
            pipe = self.r.pipeline(transaction=False)
            for key in keys:
                pipe.hmget(key, ["state", "tasks"])
            runs = []
            for key, values in zip(keys, pipe.execute(raise_on_error=False), strict=True):
                if isinstance(values, Exception) or values[0] is None:
                    continue  # not a hash, or gone
                if _s(values[0]) in _RUN_ACTIVE:
                    tasks = [t for t in _s(values[1] or b"").split(",") if t]
                    runs.append((key, key[len(head_run) :], tasks))
            for key, rid, tasks in runs:
                self.counts.runs_active += 1
                batch: list[Cmd] = [("hmget", key, fields)]
                batch += [("hmget", k.ti(shard, f"{rid}/{t}"), ["state", "deps"]) for t in tasks]
                snap = self.tx(batch)
                self._judge_run(shard, key, rid, snap[0], tasks, snap[1:])

    def _judge_run(
        self, shard: int, key: str, rid: str, run: Any, tasks: list[str], rows: list[Any]
    ) -> None:
        r = [_s(v) if v is not None else "" for v in run]
        state, job_id = r[0], r[1]
        if state not in _RUN_ACTIVE:
            return  # ended meanwhile
        fix = self._fix_run(shard, rid)
        active = self.k.active(shard, job_id or rid.partition("@")[0])
        if not self.r.sismember(active, rid):
            self.add(
                "active_run_missing",
                shard,
                active,
                f"Run {rid} is {state} but not in {active}: the job's overlap policy does "
                "not see it. Repair adds it.",
                fix,
            )
        missing = [t for t, row in zip(tasks, rows, strict=True) if row[0] is None]
        if missing:
            self.add(
                "run_task_missing",
                shard,
                key,
                f"Run {rid} is {state} but its task(s) {', '.join(missing)} have no hash "
                f"({self.k.ti(shard, rid + '/' + missing[0])}): the run cannot end. "
                f"Cancel the run (redcron runs cancel {rid}) and look at why they went.",
            )
            return
        states = [_s(row[0]) for row in rows]
        want = run_recount(states)
        have = tuple(r[3:8])
        wanted = (want.total, want.n_done, want.n_succeeded, want.n_failed, want.n_cancelled)
        if have != tuple(str(x) for x in wanted):
            self.add(
                "run_counters_wrong",
                shard,
                key,
                f"Run {rid} counts (total, done, succeeded, failed, cancelled) = "
                f"({', '.join(v or '?' for v in have)}) but its tasks say "
                f"{wanted}: it may never end, or end wrongly. Repair recounts it "
                "(and ends it if every task has ended).",
                fix,
            )
        graph = {
            t: (s, [d for d in _s(row[1] or b"").split(",") if d])
            for t, s, row in zip(tasks, states, rows, strict=True)
        }
        can, fanin = run_progress(graph)
        if fanin:
            self.add(
                "run_stuck",
                shard,
                key,
                f"Run {rid}: task(s) {', '.join(fanin)} are pending though every "
                "dependency succeeded (a fan-in that did not happen). Repair makes them "
                "ready.",
                fix,
            )
        elif not can and want.n_done == want.total:
            self.add(
                "run_stuck",
                shard,
                key,
                f"Run {rid} is {state} though every task has ended: it should have "
                "ended. Repair ends it.",
                fix,
            )
        elif not can:
            self.add(
                "run_stuck",
                shard,
                key,
                f"Run {rid} is {state} but no task is ready, leased, waiting or able to "
                f"become ready: it can never end. Cancel it (redcron runs cancel {rid}).",
            )

    def _fix_run(self, shard: int, rid: str) -> Fix:
        def fix() -> tuple[bool, str]:
            word, readied = self.call("doctor_run", shard, [rid, self.now_arg()])
            word = _s(word)
            text = _RUN_WORDS.get(word, word)
            if int(readied):
                text += f"; made {int(readied)} pending task(s) ready"
            return word != "task_missing", text

        return fix


def _asdict(finding: Finding) -> dict[str, Any]:
    return {f: getattr(finding, f) for f in Finding.__dataclass_fields__}


_PLACE_WORDS = {
    "in_place": "in its place on re-check: nothing written",
    "requeued": "added to its ready stream again (tenant on its ring, a worker woken)",
    "entry_pending": "not requeued: its entry is delivered or its lease deadline is ahead",
    "timer_added": "timer set at its due time",
    "lease_indexed": "lease added to the tenant's lease set and the reaper's index",
    "lease_live": "left: the lease's deadline is still ahead",
    "lease_ended": "attempt ended 'lost' as the reaper ends an expired lease",
    "dlq_added": "a new DLQ entry written",
    "held_added": "appended to the job's held list",
    "missing": "the instance is gone",
}
_RING_WORDS = {
    "added": "put the tenant on the ring (and the aging index)",
    "removed": "took the tenant off the ring and the aging index (deficit reset)",
    "aged": "recorded the tenant's oldest ready entry in the aging index",
    "unaged": "dropped the aging entry",
    "in_place": "consistent on re-check: nothing written",
}
_SCHEDULE_WORDS = {
    "added": "scheduled at the job's next fire",
    "dropped": "removed from the schedule",
    "in_place": "consistent on re-check: nothing written",
    "changed": "the job changed meanwhile: nothing written, run doctor again",
}
_RUN_WORDS = {
    "recounted": "counters and active set rewritten from the tasks",
    "in_place": "consistent on re-check",
    "gone": "run gone: removed from the job's active set",
    "ended": "run ended: removed from the job's active set",
    "task_missing": "a task has no hash: nothing rewritten",
}

__all__ = [
    "RunCounts",
    "examine",
    "glob_escape",
    "instance_problem",
    "run_progress",
    "run_recount",
    "undelivered",
]
