"""Runs and DAGs at the script level (real Redis, no worker).

The tests drive task instances through ``Leases.lease`` / ``complete`` /
``fail`` themselves, so every step of a run's lifecycle (queued, running, ended) is
checked right where it happens: fan-out and fan-in, a failed task failing
its downstream while independent branches go on, retry = DLQ replay,
cancel, retention, pause after failures and the overlap policies of
``fire.lua``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from followups import follow  # tests/helpers
from server_time import server_ms  # tests/helpers

from redcron import App
from redcron.engine import FailItem, Lease, TaskFilter, list_tasks
from redcron.engine.argv import FireArgs
from redcron.errors import Conflict, TaskFailed
from redcron.keys import GROUP
from redcron.model import RunRecord, TaskRecord
from redcron.model.jobs import Task
from redcron.model.records import from_ms

TENANT = "acme"
WORKER = "w1"
T0 = 1_700_000_040_000  # a nominal fire time (ms) for runs created through fire.lua
MINUTE = 60_000


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    a.broker.ensure_meta()
    yield a
    a.close()


class Runs:
    """A job of the test app and the script calls that move its runs on."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.b = app.broker
        self.r = app.broker.client
        self.k = app.broker.keys
        self.shard = 0

    def job(self, name: str, tasks: dict[str, Task], **policies: Any) -> str:
        # the scripts are under test, not the task registry: no app registers "t"
        return self.app.jobs.put(
            name, tasks=tasks, tenant=TENANT, allow_unregistered=True, **policies
        ).id

    def trigger(self, name: str, now: int | None = None) -> str:
        return self.app.jobs.trigger(name, tenant=TENANT, now=now)

    def fire(self, job_id: str, fire_ms: int) -> tuple[str, str]:
        """Fire as the beat would (not from the schedule: the score is not checked)."""
        out = self.b.beat.fire_one(
            self.shard,
            FireArgs(job_id, "", "", fire_ms, None, None, "", "cron", 0, f"{job_id}@{fire_ms}"),
        )
        follow(self.b)  # cancel_previous cancels the previous run's tasks in a follow-up
        return out

    # -- moving instances --------------------------------------------------------

    def lease(self, n: int = 256, queues: tuple[str, ...] = ("default",)) -> dict[str, Lease]:
        """Lease what is ready, keyed by task name."""
        got = self.b.leases.lease(self.shard, WORKER, n, 60_000, list(queues))
        return {lease.iid.rsplit("/", 1)[1]: lease for lease in got}

    def ok(self, *leases: Lease) -> None:
        assert self.b.leases.complete(
            self.shard, WORKER, [(x.iid, x.epoch, b"\xc0") for x in leases]
        ) == [True] * len(leases)
        follow(self.b)  # what reacts to the ends (retention, chaining...): maintenance's

    def fail(self, lease: Lease, *, retryable: bool = False, outcome: str = "failed") -> str:
        [res] = self.b.leases.fail(
            self.shard,
            WORKER,
            [FailItem(lease.iid, lease.epoch, outcome, "boom", retryable=retryable, delay_ms=0)],
        )
        assert res.state is not None
        follow(self.b)
        return res.state

    def run_through(self, name: str, now: int | None = None) -> str:
        """Trigger a run of a one-task job and let it succeed (``now``: the run's
        scheduled_for, which orders the job's history)."""
        rid = self.trigger(name, now)
        self.ok(*self.lease().values())
        assert self.run(rid).state == "succeeded"
        return rid

    # -- reading -----------------------------------------------------------------

    def run(self, run_id: str) -> RunRecord:
        return self.app.jobs.run(run_id)

    def states(self, run_id: str) -> dict[str, str]:
        return {t.task or "": t.state for t in self.run(run_id).tasks or ()}

    def counters(self, run_id: str) -> dict[str, int]:
        info = self.run(run_id)
        names = ("total", "done", "succeeded", "failed", "cancelled")
        return {n: getattr(info, n) for n in names}

    def ready(self, queue: str = "default") -> list[str]:
        """Instance ids ready on the tenant's stream, in order (duplicates kept):
        its entries less those pending (leased) in the consumer group."""
        key = self.k.q(self.shard, queue, TENANT, "normal")
        entries: Any = self.r.xrange(key)
        if not entries:
            return []
        leased = {p["message_id"] for p in self.r.xpending_range(key, GROUP, "-", "+", 10_000)}
        return [fields[b"i"].decode() for eid, fields in entries if eid not in leased]

    def ti_key(self, iid: str) -> str:
        return self.k.ti(self.shard, iid)

    def job_hash(self, job_id: str) -> dict[str, str]:
        raw = self.r.hgetall(self.k.job(self.shard, job_id))
        return {k.decode(): v.decode(errors="replace") for k, v in raw.items()}

    def dlq(self) -> list[str]:
        entries: Any = self.r.xrange(self.k.dlq(self.shard, TENANT))
        return [fields[b"i"].decode() for _eid, fields in entries]

    def active(self, job_id: str) -> set[str]:
        return {x.decode() for x in self.r.smembers(self.k.active(self.shard, job_id))}


@pytest.fixture
def runs(app: App) -> Runs:
    return Runs(app)


def chain(*names: str, **options: Any) -> dict[str, Task]:
    """a -> b -> c ... (each task depends on the one before)."""
    return {
        n: Task("t", depends_on=[names[i - 1]] if i else [], **options) for i, n in enumerate(names)
    }


# -- fan-out, fan-in, run lifecycle ------------------------------------------------


def test_task_list_reads_run_tasks_an_older_version_put_in_recent_once(runs: Runs) -> None:
    """Before the run listing stood for its tasks, run creation added each task to
    ``recent`` too: such an entry, still in a deployed Redis, is listed once."""
    runs.job("old", chain("a", "b"))
    rid = runs.trigger("old")
    created = runs.r.zscore(runs.k.runidx(runs.shard), rid)
    runs.r.zadd(runs.k.recent(runs.shard), {f"{rid}/a": created, f"{rid}/b": created})
    ids = [t.id for t in list_tasks(runs.b, TaskFilter())]
    assert sorted(ids) == [f"{rid}/a", f"{rid}/b"]


def test_a_run_hash_and_its_tasks_leave_out_what_their_ids_say(runs: Runs) -> None:
    """Issue 19 §4: the run hash holds no id or job (its key says them) and no
    counter at 0, yet its end still finds its job (active set, history); a
    succeeded task's last attempt has no outcome or end of its own (the
    instance's state and ended say them)."""
    job_id = runs.job("lean", chain("a", "b"))
    rid = runs.trigger("lean")
    created = {k.decode() for k in runs.r.hkeys(runs.k.run(0, rid))}
    assert not {"n_done", "n_succeeded", "n_failed", "n_cancelled"} & created, created
    runs.ok(runs.lease()["a"])
    runs.ok(runs.lease()["b"])
    raw = {k.decode() for k in runs.r.hkeys(runs.k.run(0, rid))}
    assert not {"id", "job", "n_failed", "n_cancelled"} & raw, raw
    run = runs.run(rid)
    assert (run.total, run.done, run.succeeded, run.failed, run.cancelled) == (2, 2, 2, 0, 0)
    assert runs.active(job_id) == set()
    assert runs.run(rid).job_id == job_id and runs.run(rid).state == "succeeded"
    for t in "ab":
        fields = {k.decode() for k in runs.r.hkeys(runs.ti_key(f"{rid}/{t}"))}
        # the succeeded last attempt is told by worker / leased / ended alone
        gone = {"id", "run", "task", "loc", "due", "deadline", "lease_entry", "a:1:w",
                "a:1:l", "a:1:outcome", "a:1:ended", "deps_left"}  # fmt: skip
        assert not gone & fields, fields
        rec = runs.b.inspection.task_info(f"{rid}/{t}")
        assert (rec.run_id, rec.task, rec.worker) == (rid, t, WORKER)
        [a1] = rec.attempts
        assert (a1.outcome, a1.ended_at, a1.worker) == ("succeeded", rec.ended_at, WORKER)


def test_a_run_hash_an_older_version_wrote_with_its_zero_counters_ends_the_same(
    runs: Runs,
) -> None:
    """Hashes a previous release wrote hold n_done..n_cancelled at 0: they count
    and end as the lean ones (a failure ends the run failed either way)."""
    runs.job("old0", chain("a", "b"))
    rid = runs.trigger("old0")
    runs.r.hset(runs.k.run(0, rid), mapping={"n_done": 0, "n_succeeded": 0, "n_failed": 0,
                                            "n_cancelled": 0})  # fmt: skip
    runs.ok(runs.lease()["a"])
    assert runs.run(rid).state == "running"
    runs.ok(runs.lease()["b"])
    run = runs.run(rid)
    assert (run.state, run.done, run.succeeded, run.failed) == ("succeeded", 2, 2, 0)


def test_diamond_fans_in_once_and_the_run_goes_queued_running_succeeded(runs: Runs) -> None:
    runs.job(
        "diamond",
        {
            "a": Task("t"),
            "b": Task("t", depends_on=["a"]),
            "c": Task("t", depends_on=["a"]),
            "d": Task("t", depends_on=["b", "c"]),
        },
    )
    rid = runs.trigger("diamond")
    assert runs.states(rid) == {"a": "ready", "b": "pending", "c": "pending", "d": "pending"}
    # task list finds every task of the run through the run's one runidx entry:
    # the recent index holds none of them (it would repeat that entry per task)
    assert not runs.r.zrange(runs.k.recent(runs.shard), 0, -1)
    listed = {t.id for t in list_tasks(runs.b, TaskFilter())}
    assert {f"{rid}/{t}" for t in "abcd"} <= listed
    tenant = runs.run(rid).tenant
    assert {t.id for t in list_tasks(runs.b, TaskFilter(tenant=tenant, state="pending"))} == {
        f"{rid}/{t}" for t in "bcd"
    }
    assert runs.ready() == [f"{rid}/a"]
    assert runs.run(rid).state == "queued"

    leased = runs.lease()
    assert list(leased) == ["a"]
    assert runs.run(rid).state == "running"  # the first lease starts the run
    assert runs.run(rid).started_at is not None
    runs.ok(leased["a"])
    assert runs.states(rid) == {"a": "succeeded", "b": "ready", "c": "ready", "d": "pending"}
    assert sorted(runs.ready()) == [f"{rid}/b", f"{rid}/c"]

    leased = runs.lease()
    assert sorted(leased) == ["b", "c"]
    runs.ok(leased["b"])
    assert runs.states(rid)["d"] == "pending"  # c has not succeeded yet
    assert runs.ready() == []
    runs.ok(leased["c"])
    assert runs.states(rid)["d"] == "ready"
    assert runs.ready() == [f"{rid}/d"]  # made ready exactly once
    assert runs.counters(rid) == {
        "total": 4,
        "done": 3,
        "succeeded": 3,
        "failed": 0,
        "cancelled": 0,
    }
    assert runs.run(rid).state == "running"

    runs.ok(runs.lease()["d"])
    info = runs.run(rid)
    assert info.state == "succeeded"
    assert info.ended_at is not None and info.started_at is not None
    assert info.ended_at >= info.started_at
    assert runs.counters(rid)["done"] == runs.counters(rid)["succeeded"] == 4
    assert runs.active(info.job_id) == set()


def test_wide_fan_out_and_fan_in(runs: Runs) -> None:
    mids = [f"m{i:02d}" for i in range(50)]
    tasks = {"src": Task("t")}
    tasks.update({m: Task("t", depends_on=["src"]) for m in mids})
    tasks["sink"] = Task("t", depends_on=mids)
    runs.job("wide", tasks)
    rid = runs.trigger("wide")
    runs.ok(runs.lease()["src"])
    assert sorted(runs.ready()) == sorted(f"{rid}/{m}" for m in mids)

    leased = runs.lease()
    assert sorted(leased) == mids
    runs.ok(*(leased[m] for m in mids[:49]))
    assert runs.states(rid)["sink"] == "pending"
    assert runs.ready() == []
    runs.ok(leased[mids[49]])
    assert runs.ready() == [f"{rid}/sink"]
    # 0 once ready: its default (TI_DEFAULTS), so make_ready drops it from the hash
    assert runs.r.hget(runs.ti_key(f"{rid}/sink"), "deps_left") is None

    runs.ok(runs.lease()["sink"])
    assert runs.run(rid).state == "succeeded"
    assert runs.counters(rid)["succeeded"] == 52


# -- failure: the downstream fails, independent branches go on ---------------------


def test_dead_task_fails_its_downstream_while_an_independent_branch_goes_on(
    runs: Runs,
) -> None:
    # a -> b -> d -> e ; c is a second root, independent of all of them
    runs.job(
        "branches",
        {
            "a": Task("t"),
            "b": Task("t", depends_on=["a"]),
            "d": Task("t", depends_on=["b"]),
            "e": Task("t", depends_on=["d"]),
            "c": Task("t"),
        },
    )
    rid = runs.trigger("branches")
    leased = runs.lease()
    assert sorted(leased) == ["a", "c"]
    runs.ok(leased["a"])
    assert runs.fail(runs.lease()["b"]) == "dead"
    assert runs.states(rid) == {
        "a": "succeeded",
        "b": "dead",
        "d": "upstream_failed",
        "e": "upstream_failed",
        "c": "leased",
    }
    assert runs.dlq() == [f"{rid}/b"]
    # c can still progress, so the run has not ended
    assert runs.run(rid).state == "running"
    assert runs.run(rid).ended_at is None

    runs.ok(leased["c"])
    info = runs.run(rid)
    assert info.state == "failed"
    assert runs.counters(rid) == {
        "total": 5,
        "done": 5,
        "succeeded": 2,
        "failed": 3,
        "cancelled": 0,
    }
    assert runs.job_hash(info.job_id)["consecutive_failures"] == "1"


def test_run_fails_at_once_when_the_last_progressing_task_dies(runs: Runs) -> None:
    runs.job("line", chain("a", "b", "c"))
    rid = runs.trigger("line")
    assert runs.fail(runs.lease()["a"]) == "dead"
    assert runs.states(rid) == {"a": "dead", "b": "upstream_failed", "c": "upstream_failed"}
    assert runs.run(rid).state == "failed"


def test_discarding_a_dead_task_of_an_ended_run_keeps_the_run_ended(runs: Runs) -> None:
    runs.job("line", chain("a", "b", "c"))
    rid = runs.trigger("line")
    runs.ok(runs.lease()["a"])
    assert runs.fail(runs.lease()["b"]) == "dead"
    assert runs.run(rid).state == "failed"
    assert runs.b.dlq.discard([f"{rid}/b"]) == 1
    follow(runs.b)
    assert runs.dlq() == []
    assert runs.states(rid) == {"a": "succeeded", "b": "cancelled", "c": "upstream_failed"}
    info = runs.run(rid)
    assert info.state == "failed"
    assert info.ended_at is not None
    # recounted, not counted twice
    assert runs.counters(rid) == {
        "total": 3,
        "done": 3,
        "succeeded": 1,
        "failed": 1,
        "cancelled": 1,
    }


def test_discarding_a_dead_task_lets_a_running_run_end(runs: Runs) -> None:
    # a -> b ; c independent: b dies while c is still leased
    runs.job("fork", {"a": Task("t"), "b": Task("t", depends_on=["a"]), "c": Task("t")})
    rid = runs.trigger("fork")
    leased = runs.lease()
    assert runs.fail(leased["a"]) == "dead"
    assert runs.b.dlq.discard([f"{rid}/a"]) == 1
    follow(runs.b)
    assert runs.run(rid).state == "running"
    runs.ok(leased["c"])
    info = runs.run(rid)
    assert info.state not in ("queued", "running")
    assert info.ended_at is not None
    assert runs.counters(rid)["done"] == 3
    assert runs.active(info.job_id) == set()


# -- retry of a failed task = DLQ replay ------------------------------------------


@pytest.mark.parametrize("how", ["run_retry", "dlq_replay"])
def test_retry_of_a_dead_middle_task_reopens_the_run(runs: Runs, how: str) -> None:
    job_id = runs.job("line", chain("a", "b", "c", retries=1))
    rid = runs.trigger("line")
    b_iid = f"{rid}/b"
    runs.ok(runs.lease()["a"])
    assert runs.fail(runs.lease()["b"]) == "dead"  # permanent: no retry left unused
    assert runs.run(rid).state == "failed"
    assert runs.states(rid) == {"a": "succeeded", "b": "dead", "c": "upstream_failed"}

    if how == "run_retry":
        assert runs.app.jobs.retry_run(rid, ["b"]) == 1
        follow(runs.b)
    else:
        assert runs.b.dlq.replay([b_iid]) == 1
        follow(runs.b)
    assert runs.states(rid) == {"a": "succeeded", "b": "ready", "c": "pending"}
    assert runs.dlq() == []
    assert runs.ready() == [b_iid]
    info = runs.run(rid)
    assert info.state == "running"
    assert info.ended_at is None  # cleared by the retry
    assert runs.active(job_id) == {rid}
    assert runs.counters(rid) == {
        "total": 3,
        "done": 1,
        "succeeded": 1,
        "failed": 0,
        "cancelled": 0,
    }

    # a fresh budget: retries=1 allows one retry again after the replay
    b = runs.lease()["b"]
    assert (b.iid, b.attempt) == (b_iid, 2)
    assert runs.fail(b, retryable=True) == "ready"
    b = runs.lease()["b"]
    assert (b.iid, b.attempt) == (b_iid, 3)
    runs.ok(b)
    assert runs.states(rid) == {"a": "succeeded", "b": "succeeded", "c": "ready"}
    runs.ok(runs.lease()["c"])
    assert runs.run(rid).state == "succeeded"
    assert runs.counters(rid)["succeeded"] == 3
    outcomes = [a.outcome for a in runs.b.inspection.task_info(b_iid).attempts]
    assert outcomes == ["failed", "failed", "succeeded"]
    assert "consecutive_failures" not in runs.job_hash(job_id)  # 0: absent


def test_retry_with_no_names_retries_every_dead_task(runs: Runs) -> None:
    runs.job("two", {"a": Task("t"), "b": Task("t"), "c": Task("t", depends_on=["a", "b"])})
    rid = runs.trigger("two")
    leased = runs.lease()
    runs.fail(leased["a"])
    runs.fail(leased["b"])
    assert runs.run(rid).state == "failed"
    assert runs.app.jobs.retry_run(rid) == 2
    follow(runs.b)
    assert runs.states(rid) == {"a": "ready", "b": "ready", "c": "pending"}
    leased = runs.lease()
    runs.ok(leased["a"], leased["b"])
    runs.ok(runs.lease()["c"])
    assert runs.run(rid).state == "succeeded"


def test_retrying_a_task_whose_upstream_is_still_dead_does_not_reopen_the_run(
    runs: Runs,
) -> None:
    # c can never run while b is dead: reopening the run for it would leave a
    # run 'running' that nothing can progress
    runs.job("line", chain("a", "b", "c"))
    rid = runs.trigger("line")
    runs.ok(runs.lease()["a"])
    runs.fail(runs.lease()["b"])
    assert runs.run(rid).state == "failed"
    assert runs.app.jobs.retry_run(rid, ["c"]) == 0
    follow(runs.b)
    assert runs.states(rid) == {"a": "succeeded", "b": "dead", "c": "upstream_failed"}
    assert runs.run(rid).state == "failed"
    # named together, b is retried and c waits for it
    assert runs.app.jobs.retry_run(rid, ["c", "b"]) >= 1
    follow(runs.b)
    assert runs.states(rid) == {"a": "succeeded", "b": "ready", "c": "pending"}
    runs.ok(runs.lease()["b"])
    runs.ok(runs.lease()["c"])
    assert runs.run(rid).state == "succeeded"


def test_retry_and_replay_refuse_to_reopen_a_run_while_another_is_active(runs: Runs) -> None:
    # overlap 'skip': one active run at a time, so an ended run is not reopened
    # beside a newer one, whether by retry or by DLQ replay (one operation)
    job_id = runs.job("line", chain("a", "b"), overlap="skip")
    rid = runs.trigger("line")
    runs.fail(runs.lease()["a"])
    assert runs.run(rid).state == "failed"
    newer = runs.trigger("line")
    with pytest.raises(Conflict):
        runs.app.jobs.retry_run(rid, ["a"])
        follow(runs.b)
    assert runs.b.dlq.replay([f"{rid}/a"]) == 0
    follow(runs.b)
    assert runs.states(rid) == {"a": "dead", "b": "upstream_failed"}
    assert runs.dlq() == [f"{rid}/a"]
    assert runs.run(rid).state == "failed"
    assert runs.active(job_id) == {newer}

    runs.ok(runs.lease()["a"])
    runs.ok(runs.lease()["b"])
    assert runs.b.dlq.replay([f"{rid}/a"]) == 1  # nothing else active: allowed
    follow(runs.b)
    assert runs.run(rid).state == "running"


def test_a_reopened_run_and_all_its_instances_lose_their_retention_ttl(runs: Runs) -> None:
    runs.job("line", chain("a", "b", "c"), keep_days=1)
    rid = runs.trigger("line")
    runs.ok(runs.lease()["a"])
    runs.fail(runs.lease()["b"])
    runs.b.dlq.discard([f"{rid}/b"])  # while b is in the DLQ the run keeps no TTL
    follow(runs.b)
    keys = [runs.k.run(0, rid), *(runs.ti_key(f"{rid}/{t}") for t in "abc")]
    assert all(0 < runs.r.ttl(k) <= 86_400 for k in keys)  # ended: retention applies
    runs.app.jobs.retry_run(rid, ["b"])
    follow(runs.b)
    # live again: nothing of it may expire (a's record is what c's fan-in reads)
    assert [runs.r.ttl(k) for k in keys] == [-1, -1, -1, -1]


# -- cancel ------------------------------------------------------------------------


def test_cancel_mid_run_ends_running_work_and_the_run_at_once(runs: Runs) -> None:
    # issue 16 item 8: the run waited for its running task, which then succeeded
    runs.job("line", chain("a", "b", "c"))
    rid = runs.trigger("line")
    runs.ok(runs.lease()["a"])
    b = runs.lease()["b"]
    assert runs.states(rid) == {"a": "succeeded", "b": "leased", "c": "pending"}

    done = runs.app.jobs.cancel_run(rid)
    assert (done.state, done.cancelled, done.running) == ("cancelled", True, ("b",))
    assert done.may_still_be_running
    assert runs.states(rid) == {"a": "succeeded", "b": "cancelled", "c": "cancelled"}
    info = runs.run(rid)
    assert info.state == "cancelled"
    assert runs.counters(rid) == {
        "total": 3,
        "done": 3,
        "succeeded": 1,
        "failed": 0,
        "cancelled": 2,
    }
    assert runs.active(info.job_id) == set()
    b_info = runs.b.inspection.task_info(b.iid)
    assert [a.outcome for a in b_info.attempts] == ["cancelled"]

    # b's worker: revoked at its heartbeat, and its report refused
    lost, revoked = runs.b.leases.heartbeat(0, WORKER, 60_000, [(b.iid, b.epoch)])
    assert (lost, revoked) == ([], [b.iid])
    assert runs.b.leases.complete(0, WORKER, [(b.iid, b.epoch, b"\xc0")]) == [False]
    [res] = runs.b.leases.fail(
        0, WORKER, [FailItem(b.iid, b.epoch, "cancelled", "x", retryable=False)]
    )
    assert res.state is None
    assert runs.states(rid) == {"a": "succeeded", "b": "cancelled", "c": "cancelled"}
    assert runs.counters(rid)["cancelled"] == 2
    # a second cancel changes nothing, and says the run had ended
    again = runs.app.jobs.cancel_run(rid)
    assert (again.state, again.cancelled, again.running) == ("cancelled", False, ())


def test_cancel_of_a_run_with_nothing_running_ends_it_at_once(runs: Runs) -> None:
    runs.job("diamond", {"a": Task("t"), "b": Task("t", depends_on=["a"]), "c": Task("t")})
    rid = runs.trigger("diamond")
    done = runs.app.jobs.cancel_run(rid)
    assert (done.state, done.cancelled, done.may_still_be_running) == ("cancelled", True, False)
    assert runs.states(rid) == {"a": "cancelled", "b": "cancelled", "c": "cancelled"}
    assert runs.ready() == []
    assert runs.lease() == {}


def test_retry_after_cancel_runs_the_downstream_without_revoking_it(runs: Runs) -> None:
    runs.job("line", chain("a", "b", "c"))
    rid = runs.trigger("line")
    runs.ok(runs.lease()["a"])
    runs.lease()["b"]
    runs.app.jobs.cancel_run(rid)
    assert runs.run(rid).state == "cancelled"

    assert runs.app.jobs.retry_run(rid, ["b"]) == 1
    follow(runs.b)
    assert runs.states(rid) == {"a": "succeeded", "b": "ready", "c": "pending"}
    runs.ok(runs.lease()["b"])
    c = runs.lease()["c"]
    # c was cancelled by the run's cancel; once reset it must not be revoked
    assert runs.b.leases.heartbeat(0, WORKER, 60_000, [(c.iid, c.epoch)]) == ([], [])
    assert runs.fail(c, retryable=True) == "ready"  # a retry, not a cancel
    runs.ok(runs.lease()["c"])
    assert runs.run(rid).state == "succeeded"


# -- ids, retention, pause ---------------------------------------------------------


def test_instance_id_is_run_and_task_and_stays_the_same_across_attempts(runs: Runs) -> None:
    runs.job("one", {"a": Task("t", retries=2)})
    rid = runs.trigger("one")
    first = runs.lease()["a"]
    assert first.iid == f"{rid}/a"
    assert first.attempt == 1
    assert runs.fail(first, retryable=True) == "ready"
    second = runs.lease()["a"]
    assert (second.iid, second.attempt) == (first.iid, 2)
    assert int(second.epoch) > int(first.epoch)
    # the stale token of attempt 1 writes nothing
    assert runs.b.leases.complete(0, WORKER, [(first.iid, first.epoch, b"\xc0")]) == [False]
    runs.ok(second)
    [inst] = runs.run(rid).tasks or ()
    assert isinstance(inst, TaskRecord)
    assert inst.id == f"{rid}/a"
    assert [a.outcome for a in inst.attempts] == ["failed", "succeeded"]


def test_retention_ttls_once_ended_and_history_bounded_by_keep_runs(runs: Runs) -> None:
    keep = 2
    job_id = runs.job("quick", {"a": Task("t")}, keep_runs=keep, keep_days=0.5)
    rid = runs.trigger("quick")
    keys = [runs.k.run(0, rid), runs.ti_key(f"{rid}/a")]
    assert [runs.r.ttl(k) for k in keys] == [-1, -1]  # nothing live expires
    runs.ok(*runs.lease().values())
    assert all(0 < runs.r.ttl(k) <= 43_200 for k in keys)

    rids = [rid]
    start = server_ms(runs.r)  # distinct scheduled_for (ms) so "oldest" is well defined
    for i in range(keep + 2):
        rids.append(runs.run_through("quick", now=start + 1 + i))
    hist = [x.decode() for x in runs.r.zrange(runs.k.runs(0, job_id), 0, -1)]
    assert hist == rids[-keep:]
    for old in rids[:-keep]:
        assert not runs.r.exists(runs.k.run(0, old))
        assert not runs.r.exists(runs.ti_key(f"{old}/a"))
    for kept in rids[-keep:]:
        assert runs.run(kept).state == "succeeded"
    assert [r.id for r in runs.app.jobs.runs(job_id)] == rids[-keep:][::-1]


def test_index_entries_of_runs_gone_with_their_retention_are_dropped(runs: Runs) -> None:
    """A history below keep_runs is never trimmed by count, nor are runidx and
    truns below their caps, but runs expire after keep_s: their entries must not
    pile up (bench soak saw the growth)."""
    job_id = runs.job("quick", {"a": Task("t")}, keep_runs=1000)
    start = server_ms(runs.r)  # distinct scheduled_for (ms) so "oldest" is well defined
    rids = [runs.run_through("quick", now=start + i) for i in range(4)]
    for old in rids[:3]:  # as if their keep_s ran out
        runs.r.delete(runs.k.run(0, old), runs.ti_key(f"{old}/a"))
    tenant = runs.r.hget(runs.k.run(0, rids[3]), "tenant").decode()
    # the history, and the shard's and the tenant's run listings alike
    indexes = [runs.k.runs(0, job_id), runs.k.runidx(0), runs.k.truns(0, tenant)]
    runs.run_through("quick", now=start + 4)  # each run end drops up to two expired entries
    for index in indexes:
        assert [x.decode() for x in runs.r.zrange(index, 0, -1)][:2] == [rids[2], rids[3]]
    runs.run_through("quick", now=start + 5)
    for index in indexes:
        assert runs.r.zrange(index, 0, 0) == [rids[3].encode()]
    assert len(runs.app.jobs.runs(job_id)) == 3


def test_pause_after_consecutive_failed_runs(runs: Runs) -> None:
    job_id = runs.job("flaky", {"a": Task("t")}, cron="0 0 1 1 *", pause_after_failures=2)
    schedule = runs.k.schedule(0)
    assert runs.r.zscore(schedule, job_id) is not None

    def failed_run() -> None:
        rid = runs.trigger("flaky")
        runs.fail(runs.lease()["a"])
        assert runs.run(rid).state == "failed"

    failed_run()
    assert runs.job_hash(job_id)["consecutive_failures"] == "1"
    runs.run_through("flaky")  # a success resets the count
    assert "consecutive_failures" not in runs.job_hash(job_id)  # 0: absent
    failed_run()
    assert runs.job_hash(job_id).get("paused", "0") == "0"  # not paused: absent
    assert runs.r.zscore(schedule, job_id) is not None
    failed_run()
    job = runs.job_hash(job_id)
    assert job["paused"] == "1"
    assert "2 consecutive failed runs" in job["paused_reason"]
    assert runs.r.zscore(schedule, job_id) is None
    # the beat's fires are refused while paused; manual runs still go
    assert runs.fire(job_id, T0) == ("paused", "")


# -- overlap policies (fire.lua, as the beat calls it) -------------------------------


def test_overlap_skip_records_a_skipped_run_without_instances(runs: Runs) -> None:
    job_id = runs.job("sk", chain("a", "b"), overlap="skip")
    status, first = runs.fire(job_id, T0)
    assert (status, first) == ("created", f"{job_id}@{T0}")
    status, second = runs.fire(job_id, T0 + MINUTE)
    assert (status, second) == ("skipped", f"{job_id}@{T0 + MINUTE}")
    info = runs.run(second)
    assert info.state == "skipped"
    assert info.total == 0
    assert info.tasks == ()
    assert info.scheduled_for == from_ms(T0 + MINUTE)
    assert not runs.r.exists(runs.ti_key(f"{second}/a"))
    assert runs.active(job_id) == {first}
    assert runs.ready() == [f"{first}/a"]
    assert runs.b.inspection.stats()["fires_overlap_skipped"] == 1
    hist = [x.decode() for x in runs.r.zrange(runs.k.runs(0, job_id), 0, -1)]
    assert hist == [first, second]

    runs.ok(runs.lease()["a"])
    runs.ok(runs.lease()["b"])
    assert runs.fire(job_id, T0 + 2 * MINUTE)[0] == "created"  # nothing active any more


def test_overlap_allow_runs_side_by_side(runs: Runs) -> None:
    job_id = runs.job("al", chain("a", "b"), overlap="allow")
    first = runs.fire(job_id, T0)
    second = runs.fire(job_id, T0 + MINUTE)
    assert [first[0], second[0]] == ["created", "created"]
    assert runs.active(job_id) == {first[1], second[1]}
    assert sorted(runs.ready()) == sorted([f"{first[1]}/a", f"{second[1]}/a"])


def test_overlap_buffer_one_holds_one_fire_and_starts_it_when_the_run_ends(
    runs: Runs,
) -> None:
    job_id = runs.job("bu", chain("a", "b"), overlap="buffer_one")
    status, first = runs.fire(job_id, T0)
    assert status == "created"
    assert runs.fire(job_id, T0 + MINUTE) == ("buffered", f"{job_id}@{T0 + MINUTE}")
    # one is already buffered: this fire is recorded as skipped, never lost silently
    status, third = runs.fire(job_id, T0 + 2 * MINUTE)
    assert status == "skipped"
    assert runs.run(third).state == "skipped"
    assert runs.b.inspection.stats()["fires_overlap_skipped"] == 1
    buffered = f"{job_id}@{T0 + MINUTE}"
    assert not runs.r.exists(runs.k.run(0, buffered))
    assert runs.active(job_id) == {first}

    runs.ok(runs.lease()["a"])
    runs.ok(runs.lease()["b"])
    assert runs.run(first).state == "succeeded"
    info = runs.run(buffered)  # created by the end of the first run
    assert info.state == "queued"
    assert info.scheduled_for == from_ms(T0 + MINUTE)
    assert info.trigger == "cron"
    assert runs.active(job_id) == {buffered}
    assert runs.ready() == [f"{buffered}/a"]
    assert runs.job_hash(job_id)["buffered"] == ""

    runs.ok(runs.lease()["a"])
    runs.ok(runs.lease()["b"])
    assert runs.run(buffered).state == "succeeded"
    assert runs.active(job_id) == set()  # nothing more was buffered
    hist = [x.decode() for x in runs.r.zrange(runs.k.runs(0, job_id), 0, -1)]
    assert hist == [first, buffered, third]


def test_overlap_cancel_previous_cancels_the_active_run(runs: Runs) -> None:
    job_id = runs.job("cp", chain("a", "b"), overlap="cancel_previous")
    _, first = runs.fire(job_id, T0)
    a = runs.lease()["a"]
    status, second = runs.fire(job_id, T0 + MINUTE)
    assert status == "created"
    # the running task ends cancelled (a follow-up of the fire), and the first run with it
    assert runs.states(first) == {"a": "cancelled", "b": "cancelled"}
    assert runs.run(first).state == "cancelled"
    assert runs.states(second) == {"a": "ready", "b": "pending"}
    assert runs.active(job_id) == {second}
    assert runs.b.leases.heartbeat(0, WORKER, 60_000, [(a.iid, a.epoch)]) == ([], [a.iid])
    assert runs.b.leases.complete(0, WORKER, [(a.iid, a.epoch, b"\xc0")]) == [False]
    assert runs.run(first).state == "cancelled"

    # nothing of the second run is running: it is cancelled at once
    status, third = runs.fire(job_id, T0 + 2 * MINUTE)
    assert status == "created"
    assert runs.run(second).state == "cancelled"
    assert runs.active(job_id) == {third}
    assert runs.ready() == [f"{third}/a"]


def test_buffered_fire_of_a_job_paused_meanwhile_is_skipped_not_started(runs: Runs) -> None:
    job_id = runs.job("bp", {"a": Task("t")}, overlap="buffer_one", pause_after_failures=1)
    _, first = runs.fire(job_id, T0)
    assert runs.fire(job_id, T0 + MINUTE)[0] == "buffered"
    runs.fail(runs.lease()["a"])  # the run fails and pauses the job
    assert runs.run(first).state == "failed"
    assert runs.job_hash(job_id)["paused"] == "1"
    buffered = runs.run(f"{job_id}@{T0 + MINUTE}")
    assert buffered.state == "skipped"
    assert buffered.tasks == ()
    assert runs.active(job_id) == set()
    assert runs.ready() == []


# -- terminal states: one definition (redcron.model.states) ------------------------------


def test_result_of_an_upstream_failed_task_raises_at_once(runs: Runs) -> None:
    # result() waited for upstream_failed until its timeout (forever without one):
    # watch.lua's terminal list left it out
    runs.job("line", chain("a", "b"))
    rid = runs.trigger("line")
    assert runs.fail(runs.lease()["a"]) == "dead"
    assert runs.states(rid)["b"] == "upstream_failed"
    with pytest.raises(TaskFailed) as info:
        runs.app.get(f"{rid}/b").result(timeout=10)
    assert info.value.state == "upstream_failed"


def test_waiters_of_a_downstream_task_are_woken_when_it_is_marked_upstream_failed(
    runs: Runs,
) -> None:
    runs.job("line", chain("a", "b"))
    rid = runs.trigger("line")
    b = f"{rid}/b"
    assert runs.b.inspection.watch(b) == "pending"  # a result() waiter registers
    assert runs.fail(runs.lease()["a"]) == "dead"
    # notify_done fired for b, not only for the dead task itself
    assert runs.r.llen(runs.k.done(runs.shard, b)) == 1
    assert runs.b.inspection.watch(b) == "upstream_failed"


# -- retention of runs with tasks in the DLQ --------------------------------------


def test_a_run_with_a_task_in_the_dlq_keeps_no_ttl_until_it_leaves_the_dlq(runs: Runs) -> None:
    # the dead task's hash used to expire with the run while its DLQ entry stayed:
    # replay and discard then found nothing and did nothing
    runs.job("line", chain("a", "b", "c"), keep_days=1)
    rid = runs.trigger("line")
    runs.ok(runs.lease()["a"])
    assert runs.fail(runs.lease()["b"]) == "dead"
    assert runs.run(rid).state == "failed"
    keys = [runs.k.run(0, rid), *(runs.ti_key(f"{rid}/{t}") for t in "abc")]
    assert [runs.r.ttl(k) for k in keys] == [-1, -1, -1, -1]  # held for the DLQ
    assert runs.r.hget(runs.k.run(0, rid), "dlq_held") == b"1"
    assert runs.b.dlq.discard([f"{rid}/b"]) == 1
    follow(runs.b)
    # out of the DLQ: the retention starts for the run and every instance
    assert all(0 < runs.r.ttl(k) <= 86_400 for k in keys)
    assert runs.r.hget(runs.k.run(0, rid), "dlq_held") is None


def test_a_held_run_keeps_its_ttl_off_until_its_last_dead_task_leaves(runs: Runs) -> None:
    runs.job("pair", {"a": Task("t"), "b": Task("t")}, keep_days=1)
    rid = runs.trigger("pair")
    leased = runs.lease()
    runs.fail(leased["a"])
    runs.fail(leased["b"])
    assert runs.r.hget(runs.k.run(0, rid), "dlq_held") == b"2"
    assert runs.b.dlq.discard([f"{rid}/a"]) == 1
    follow(runs.b)
    assert runs.r.ttl(runs.ti_key(f"{rid}/b")) == -1
    assert runs.r.ttl(runs.k.run(0, rid)) == -1
    # replayed: the run reopens; when it ends again, nothing is left in the DLQ
    assert runs.b.dlq.replay([f"{rid}/b"]) == 1
    follow(runs.b)
    assert runs.run(rid).state == "running"
    runs.ok(runs.lease()["b"])
    assert runs.run(rid).state == "cancelled"  # a was discarded
    keys = [runs.k.run(0, rid), runs.ti_key(f"{rid}/a"), runs.ti_key(f"{rid}/b")]
    assert all(0 < runs.r.ttl(k) <= 86_400 for k in keys)


def test_keep_runs_trimming_skips_a_run_held_for_the_dlq(runs: Runs) -> None:
    # keep_runs used to delete the oldest run with its dead task, leaving the DLQ
    # entry behind: replay returned 0 and did nothing
    job_id = runs.job("quick", {"a": Task("t")}, keep_runs=1)
    failed = runs.trigger("quick")
    assert runs.fail(runs.lease()["a"]) == "dead"
    start = server_ms(runs.r)  # distinct scheduled_for (ms) so "oldest" is well defined
    rids = [runs.run_through("quick", now=start + 1 + i) for i in range(3)]
    hist = [x.decode() for x in runs.r.zrange(runs.k.runs(0, job_id), 0, -1)]
    assert hist == [failed, rids[-1]]  # the held run stays, the others are trimmed
    assert runs.dlq() == [f"{failed}/a"]
    assert runs.b.dlq.replay([f"{failed}/a"]) == 1
    follow(runs.b)
    assert runs.run(failed).state == "running"
    runs.ok(runs.lease()["a"])
    # ended again, and no longer held: the oldest of two, trimmed to keep_runs=1
    assert [x.decode() for x in runs.r.zrange(runs.k.runs(0, job_id), 0, -1)] == [rids[-1]]
    assert runs.dlq() == []


def test_a_malformed_task_is_dead_lettered_and_its_run_moves_on(runs: Runs) -> None:
    # lease.lua quarantines it, promote dead-letters it through the same path as
    # a failed last attempt: its downstream fails and the run ends
    runs.job("hand_edited", chain("a", "b"))
    rid = runs.trigger("hand_edited")
    runs.r.hset(runs.ti_key(f"{rid}/a"), "epoch", "abc")
    assert runs.lease() == {}
    runs.b.maintenance.promote(runs.shard)
    assert runs.states(rid) == {"a": "dead", "b": "upstream_failed"}
    assert runs.dlq() == [f"{rid}/a"]
    assert runs.run(rid).state == "failed"
