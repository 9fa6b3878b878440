"""The chaos checker: read what the run left in Redis (instance hashes, runs, the
attempt audit, counters, ``doctor``'s recount) and judge it.

What is checked, once the system is idle (every process stopped):

1. **One terminal state, one outcome per attempt, nothing stuck.** Every
   instance hash is in a terminal state; every run has ended; each attempt
   ``1..attempt`` of an instance's history has an outcome and an end time; at most
   one attempt succeeded, and only the last one; the per-(tenant, outcome)
   ``attempts`` counters equal a recount of the histories (an attempt ended twice
   would be counted twice).  A task whose cancel was accepted ended
   ``cancelled``, whatever its worker reported later (its report is refused).
2. **No two attempts with valid leases overlapped.** Attempt ``n`` of an
   instance holds its lease from ``leased_n`` to ``ended_n`` (the history's
   times: the accepted report, the reaper's expiry, a hand-back or a cancel), so
   ``leased_{n+1} >= ended_n`` must hold.  Its *execution* is what the audit
   shows: from its start entry ``S_n`` (written before the body runs) to its
   end entry ``T_n`` (written after it returned; when missing, the time its
   worker process was killed or exited), all on the server clock.  Its *valid
   execution* is ``[S_n, min(T_n, ended_n)]``: a superseded attempt (a zombie:
   its worker was frozen or cut off, the reaper ended its lease and a higher
   epoch started) may go on running after its lease ended, but only until then
   does it count.  The valid executions of an instance's attempts must be
   pairwise disjoint; the overlaps of the zombie parts are counted
   (``zombie_overlaps``), not violations.  Each audited execution must belong
   to an attempt the history gave to that worker, start after it was leased,
   and run once; an outcome a worker reports (``succeeded``, ``failed``) must
   come from an audited execution that ended with that outcome before the lease
   did (a zombie's result is never written).
3. **One run per fire time.** For each job, every fire time of its schedule
   (``redcron.schedule.fires_between``) from its first fire to the end of the
   window (the beats' stop less a slack) has exactly one run, with the id
   ``<job id>@<fire ms>``; a run on no fire time, or a second run for one, is a
   duplicate.  Fires overdue by less than the catch-up window (60 s: longer than
   every outage here) are all fired, so none may be missing, none may be
   skipped (``fires_skipped``), and none may be a ``catchup`` fire.
4. **Counters equal a recount.** ``doctor`` (``doctor.examine``) finds
   nothing: lease sets, ready streams, timers, DLQ entries and run progress
   counters (``n_done``...) against the instances and streams; each tenant's
   in-flight and queued figures equal the recount (and are 0, as the system is
   idle); each tenant's DLQ holds exactly its ``dead`` instances.
5. **Nothing lost.** Every task id ``enqueue`` acknowledged exists and ended;
   every run that existed before the Redis server was killed exists after.

One module, a little over 400 lines, on purpose: the judges read one ``Facts``
snapshot and fill one ``ChaosReport``, and the rules above are their index.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from redcron.chaos.outage import MasterOutage
from redcron.doctor import examine
from redcron.keys import run_id
from redcron.model import RunRecord, TaskRecord
from redcron.model.records import epoch_ms, from_ms
from redcron.model.states import TASK_TERMINAL
from redcron.schedule.triggers import fires_between, make_trigger
from redcron.store import AuditEntry, AuditLog

if TYPE_CHECKING:
    from redcron.app import App
    from redcron.chaos.scenario import Scenario

#: outcomes only a worker's own report writes
_REPORTED = frozenset({"succeeded", "failed"})
#: sentences kept in the report (the count is exact)
MAX_LISTED = 200
INF = 1 << 62


@dataclass(frozen=True, slots=True)
class JobFacts:
    id: str
    name: str
    every: str
    first_fire_ms: int


@dataclass(frozen=True)
class Facts:
    """What the runner knows that Redis does not: the ids it was acknowledged, the
    jobs, the fire window, when each worker process stopped running anything."""

    acked: tuple[str, ...]
    acked_before_kill: int
    runs_before_kill: frozenset[str]
    jobs: tuple[JobFacts, ...]
    fire_end_ms: int
    worker_ends: Mapping[str, int]
    #: the task ids a cancel was accepted for (cancel said it cancelled them)
    cancelled: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ChaosReport:
    """The figures of one chaos run and every violation found (a sentence each)."""

    seed: int
    duration_s: float
    tasks: int
    runs: int
    run_tasks: int
    attempts: int
    audited_executions: int
    zombie_overlaps: int
    fires_expected: int
    missing_fires: int
    duplicates_in_window: int
    lost: int
    lost_runs: int
    stuck: int
    dead: int
    doctor_findings: int
    invariant_violations: int
    violations: tuple[str, ...]
    kills: int = 0
    worker_kills: int = 0
    worker_stops: int = 0
    beat_kills: int = 0
    redis_restarts: int = 0
    cancels: int = 0
    settle_s: float = 0.0
    elapsed_s: float = 0.0
    data_dir: str = ""
    outcomes: dict[str, int] = field(default_factory=dict)
    rerun: str = ""
    #: ``--cluster``: the run was on a Redis Cluster, and its master outage
    cluster: bool = False
    outage: MasterOutage | None = None

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.invariant_violations == 0

    def with_run(self, **figures: object) -> ChaosReport:
        """This report with the runner's own figures (kills...) filled in."""
        out = dataclasses.replace(self, **figures)  # type: ignore[arg-type]
        return dataclasses.replace(out, kills=out.worker_kills + out.worker_stops + out.beat_kills)


# -- pure judgements ------------------------------------------------------------------------


def _ms(value: object) -> int | None:
    return None if value is None else epoch_ms(value)  # type: ignore[arg-type]


def judge_instance(
    rec: TaskRecord, audit: Sequence[AuditEntry], worker_ends: Mapping[str, int]
) -> tuple[list[str], int]:
    """Checks 1 and 2 for one idle instance: (violations, zombie overlaps)."""
    out: list[str] = []
    iid = rec.id
    if str(rec.state) not in TASK_TERMINAL:
        out.append(f"task {iid} is still {rec.state} (attempt {rec.attempt}) when idle")
    hist = {a.number: a for a in rec.attempts}
    for n in range(1, rec.attempt + 1):
        a = hist.get(n)
        ended_ok = a is not None and a.outcome and a.ended_at is not None
        if not ended_ok and str(rec.state) in TASK_TERMINAL:
            out.append(f"task {iid} attempt {n} has no outcome, though the task ended")
    if set(hist) - set(range(1, rec.attempt + 1)):
        out.append(f"task {iid} has history for attempts {sorted(hist)} but attempt={rec.attempt}")
    wins = [a.number for a in rec.attempts if a.outcome == "succeeded"]
    if len(wins) > 1 or (wins and wins[-1] != rec.attempt):
        out.append(f"task {iid}: attempts {wins} succeeded (of {rec.attempt})")
    if (str(rec.state) == "succeeded") != bool(wins):
        out.append(f"task {iid} is {rec.state} but succeeded attempts are {wins}")
    for n in range(1, rec.attempt):
        a, b = hist.get(n), hist.get(n + 1)
        if a and b and a.ended_at and b.leased_at and b.leased_at < a.ended_at:
            out.append(
                f"task {iid}: attempt {n + 1} was leased at {b.leased_at} while attempt {n}'s "
                f"lease held until {a.ended_at}"
            )
    # executions from the audit, by attempt number
    starts: dict[int, list[AuditEntry]] = defaultdict(list)
    ends: dict[int, list[AuditEntry]] = defaultdict(list)
    epochs: dict[int, int] = {}
    for e in audit:
        (starts if e.event == "start" else ends)[e.attempt].append(e)
        if epochs.setdefault(e.attempt, e.epoch) != e.epoch:
            out.append(f"task {iid} attempt {e.attempt} was audited under epochs "
                       f"{epochs[e.attempt]} and {e.epoch}")  # fmt: skip
    ordered = sorted(epochs.items())
    for (n1, e1), (n2, e2) in itertools.pairwise(ordered):
        if e2 <= e1:
            out.append(f"task {iid}: attempt {n2} ran under epoch {e2}, not above {n1}'s {e1}")
    valid: list[tuple[int, int, int, str]] = []  # (from, to, attempt, worker)
    raw: list[tuple[int, int, int]] = []
    for n, ss in sorted(starts.items()):
        if len(ss) > 1:
            who = ", ".join(f"{s.worker} at {from_ms(s.at_ms)}" for s in ss)
            out.append(f"task {iid} attempt {n} started executing {len(ss)} times ({who})")
        s = ss[0]
        a = hist.get(n)
        if a is None:
            out.append(f"task {iid} attempt {n} ran on {s.worker} without a lease in its history")
            continue
        if a.worker != s.worker:
            out.append(f"task {iid} attempt {n} ran on {s.worker}, but its lease was given "
                       f"to {a.worker}")  # fmt: skip
        leased = _ms(a.leased_at)
        if leased is not None and s.at_ms < leased:
            out.append(f"task {iid} attempt {n} started at {from_ms(s.at_ms)}, before its "
                       f"lease at {a.leased_at}")  # fmt: skip
        end_entries = [x for x in ends.get(n, []) if x.worker == s.worker]
        ended = _ms(a.ended_at)
        t_end = end_entries[0].at_ms if end_entries else worker_ends.get(s.worker, INF)
        lease_end = INF if ended is None else ended
        raw.append((s.at_ms, t_end, n))
        valid.append((s.at_ms, min(t_end, lease_end), n, s.worker))
        if a.outcome in _REPORTED:
            reported = [x for x in end_entries if x.outcome == a.outcome]
            if not reported:
                out.append(f"task {iid} attempt {n} is recorded {a.outcome}, but no execution "
                           f"on {s.worker} ended {a.outcome}")  # fmt: skip
            elif ended is not None and reported[0].at_ms > ended:
                done = from_ms(reported[0].at_ms)
                out.append(f"task {iid} attempt {n} is recorded {a.outcome} at {a.ended_at}, "
                           f"before its execution ended at {done}")  # fmt: skip
    for n in hist:
        a = hist[n]
        if a.outcome in _REPORTED and n not in starts:
            out.append(f"task {iid} attempt {n} is recorded {a.outcome} without an audited "
                       "execution")  # fmt: skip
    valid.sort()
    for i, (f1, t1, n1, w1) in enumerate(valid):
        for f2, t2, n2, w2 in valid[i + 1 :]:
            if f2 >= t1:
                break
            if f1 < t1 and f2 < t2:
                out.append(
                    f"task {iid}: attempts {n1} ({w1}) and {n2} ({w2}) both ran with a valid "
                    f"lease between {from_ms(f2)} and {from_ms(min(t1, t2))}"
                )
    zombies = 0
    raw.sort()
    for i, (_f1, t1, _n1) in enumerate(raw):
        for f2, _t2, _n2 in raw[i + 1 :]:
            if f2 < t1:
                zombies += 1
    return out, zombies


def expected_fires(job: JobFacts, end_ms: int) -> list[int]:
    """The job's fire times (ms) from its first fire up to ``end_ms``."""
    trigger = make_trigger(every=job.every)
    start = from_ms(job.first_fire_ms - 1)
    end = from_ms(end_ms)
    assert start is not None and end is not None
    step = trigger.every or timedelta(seconds=1)
    limit = int((end - start) / step) + 2
    return [epoch_ms(t) for t in fires_between(trigger, start, end, max(0, limit))]


def judge_fires(
    job: JobFacts, runs: Iterable[RunRecord], end_ms: int
) -> tuple[list[str], int, int, int]:
    """Check 3 for one job: (violations, fires expected, missing, duplicates)."""
    out: list[str] = []
    expected = expected_fires(job, end_ms)
    grid = set(expected)
    per_fire: Counter[int] = Counter()
    dup = 0
    for r in runs:
        nominal = _ms(r.scheduled_for)
        if nominal is None or r.trigger == "manual":
            continue
        if r.id != run_id(job.id, nominal):
            out.append(f"run {r.id} of {job.name} is for fire {nominal}: its id should say so")
        if r.trigger not in ("every", "cron"):
            out.append(f"run {r.id} of {job.name} was fired as {r.trigger!r}, though no fire "
                       "was older than the catch-up window")  # fmt: skip
        if nominal > end_ms:
            continue
        if nominal not in grid:
            dup += 1
            out.append(f"run {r.id} of {job.name} is for {from_ms(nominal)}, not a fire time")
        per_fire[nominal] += 1
    for fire, n in per_fire.items():
        if n > 1:
            dup += n - 1
            out.append(f"job {job.name}: {n} runs for the fire at {from_ms(fire)}")
    missing = [f for f in expected if f not in per_fire]
    for f in missing[:20]:
        out.append(f"job {job.name}: no run for the fire at {from_ms(f)} (run {run_id(job.id, f)})")
    if len(missing) > 20:
        out.append(f"job {job.name}: {len(missing) - 20} more fires without a run")
    return out, len(expected), len(missing), dup


# -- the whole check ----------------------------------------------------------------------


def check(app: App, scenario: Scenario, facts: Facts) -> ChaosReport:
    """Read everything and judge it (see the module doc); the system must be idle."""
    broker = app.broker
    log = AuditLog(broker)
    violations: list[str] = []
    records: dict[str, TaskRecord] = {}
    audit: dict[str, list[AuditEntry]] = defaultdict(list)
    counted: Counter[tuple[str, str]] = Counter()
    recount: Counter[tuple[str, str]] = Counter()
    for shard in range(broker.shards):
        # the counters are follow-ups of the ends: the last ones, written after the
        # last maintenance pass of the stopped processes, are applied first
        while broker.maintenance.follow_up(shard)[1]:
            pass
        ids = list(log.instance_ids(shard))
        records.update(log.task_infos(shard, ids))
        for entry in log.read(shard):
            audit[entry.iid].append(entry)
        counted.update(log.attempt_counts(shard))
    # 1, 2: every instance
    zombies = 0
    stuck = 0
    dead: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for iid, rec in records.items():
        found, z = judge_instance(rec, audit.get(iid, ()), facts.worker_ends)
        violations += found
        zombies += z
        if str(rec.state) not in TASK_TERMINAL:
            stuck += 1
        if str(rec.state) == "dead":
            dead[rec.tenant] += 1
        for a in rec.attempts:
            if a.outcome:
                recount[(rec.tenant, a.outcome)] += 1
                outcomes[a.outcome] += 1
    for iid in sorted(facts.cancelled):
        found_rec = records.get(iid)
        if found_rec is not None and str(found_rec.state) != "cancelled":
            violations.append(f"task {iid} was cancelled, yet it ended {found_rec.state}")
    for iid in audit.keys() - records.keys():
        violations.append(f"task {iid} ran (audited) but has no record")
    for key in sorted(set(counted) | set(recount)):
        if counted.get(key, 0) != recount.get(key, 0):
            violations.append(
                f"attempts counter {key[0]}|{key[1]} says {counted.get(key, 0)}, the attempt "
                f"histories hold {recount.get(key, 0)}"
            )
    # 3: fires and runs
    fires = missing = dups = 0
    run_ids: set[str] = set()
    run_tasks = 0
    for job in facts.jobs:
        runs = app.jobs.runs(job.id, limit=1_000_000)
        run_ids |= {r.id for r in runs}
        run_tasks += sum(r.total for r in runs)
        for r in runs:
            if r.ended_at is None:
                stuck += 1
                violations.append(f"run {r.id} is still {r.state} when idle")
        found, n, m, d = judge_fires(job, runs, facts.fire_end_ms)
        violations += found
        fires, missing, dups = fires + n, missing + m, dups + d
        rec_job = app.jobs.get_by_id(job.id)
        if rec_job.fires_skipped:
            violations.append(f"job {job.name} skipped {rec_job.fires_skipped} fires")
    # 4: counters against the recount
    report = examine(broker)
    for f in report.findings:
        violations.append(f"doctor: {f.kind} on {f.key}: {f.detail}")
    for t in report.tenants:
        if t.in_flight != t.in_flight_recount or t.in_flight:
            violations.append(f"tenant {t.tenant}: in-flight {t.in_flight}, recount "
                              f"{t.in_flight_recount} (idle: both 0)")  # fmt: skip
        if t.queued != t.queued_recount or t.queued:
            violations.append(f"tenant {t.tenant}: queued {t.queued}, recount "
                              f"{t.queued_recount} (idle: both 0)")  # fmt: skip
        if t.dlq != dead.get(t.tenant, 0):
            violations.append(f"tenant {t.tenant}: DLQ holds {t.dlq} entries, "
                              f"{dead.get(t.tenant, 0)} of its instances are dead")  # fmt: skip
    # 5: nothing lost
    lost = [iid for iid in facts.acked if iid not in records]
    for iid in lost[:50]:
        before = "before" if facts.acked.index(iid) < facts.acked_before_kill else "after"
        violations.append(f"task {iid}, acknowledged {before} the Redis restart, is gone")
    lost_runs = sorted(facts.runs_before_kill - run_ids)
    for rid in lost_runs[:50]:
        violations.append(f"run {rid}, created before the Redis restart, is gone")
    listed = tuple(violations[:MAX_LISTED])
    return ChaosReport(
        seed=scenario.seed,
        duration_s=scenario.duration,
        tasks=len(facts.acked),
        runs=len(run_ids),
        run_tasks=run_tasks,
        attempts=sum(len(r.attempts) for r in records.values()),
        audited_executions=sum(1 for es in audit.values() for e in es if e.event == "start"),
        zombie_overlaps=zombies,
        fires_expected=fires,
        missing_fires=missing,
        duplicates_in_window=dups,
        lost=len(lost) + len(lost_runs),
        lost_runs=len(lost_runs),
        stuck=stuck,
        dead=sum(dead.values()),
        doctor_findings=len(report.findings),
        invariant_violations=len(violations),
        violations=listed,
        outcomes=dict(sorted(outcomes.items())),
        rerun=f"redcron chaos --seed {scenario.seed} --duration {scenario.duration:g} "
        f"--tasks {scenario.tasks}" + (" --cluster" if scenario.cluster else ""),
    )
