"""Circuit breaker per job: trips on the failed share of attempts,
holds the job's queued work aside, reopens through one trial task or resume."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from followups import follow  # tests/helpers
from lua_ops import Ops, Tok
from server_time import server_ms  # tests/helpers

from redcron import App
from redcron.engine import FailItem
from redcron.engine.cancel import RunCancel, TaskCancel, run_cancel, task_cancel
from redcron.keys import held_prefix, prefix_range
from redcron.model.jobs import Task


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))

    @a.task(name="brk.t", retries=0)
    def t() -> None: ...

    yield a
    a.close()


def make_job(app: App, cooldown: float = 60.0) -> str:
    app.jobs.put(
        "flaky",
        tasks={"t": Task("brk.t")},
        overlap="allow",
        breaker_threshold=0.75,
        breaker_min_attempts=4,
        breaker_cooldown_s=cooldown,
    )
    return app.jobs.job_id("flaky")


def lease(app: App, n: int = 10, now: int | None = None) -> list:  # type: ignore[type-arg]
    return app.broker.leases.lease(0, "w", n, 600_000, ["default"], now=now)


def fail_all(app: App, leases: list, now: int | None = None) -> None:  # type: ignore[type-arg]
    items = [FailItem(x.iid, x.epoch, "failed", "boom", False) for x in leases]
    app.broker.leases.fail(0, "w", items, now=now)
    follow(app)  # the breaker counts in a follow-up (maintenance, within its interval)


def job(app: App, job_id: str) -> dict[str, str]:
    return {
        k.decode(): v.decode()
        for k, v in app.broker.client.hgetall(app.broker.keys.job(0, job_id)).items()
        if not k.startswith(b"args:")
    }


def test_trips_holds_and_resume_releases(app: App) -> None:
    job_id = make_job(app)
    runs = [app.jobs.trigger("flaky") for _ in range(4)]
    got = lease(app)
    assert len(got) == 4
    fail_all(app, got[:3])
    assert job(app, job_id).get("breaker", "") == ""  # 3 of 3 failed, but fewer than 4 attempts
    assert app.jobs.open_breakers() == []
    fail_all(app, got[3:])
    assert job(app, job_id)["breaker"] == "open"
    assert [e.type for e in app.jobs.events(kind="breaker")] == ["breaker_opened"]
    assert all(app.jobs.run(r).state == "failed" for r in runs)
    # the index the dashboard reads instead of every job
    assert [j.id for j in app.jobs.open_breakers()] == [job_id]
    assert [j.id for j in app.jobs.open_breakers("default")] == [job_id]
    assert app.jobs.open_breakers("someone-else") == []

    held_runs = [app.jobs.trigger("flaky") for _ in range(3)]
    assert lease(app) == []  # the job's work is held, not handed out
    held = [f"{r}/t" for r in held_runs]
    assert [app.broker.inspection.task_info(i).state for i in held] == ["held"] * 3
    # held aside in the shard's attention ZSET, found by the job's run id prefix
    held_members = app.broker.client.zrangebylex(
        app.broker.keys.attention(0), *prefix_range(held_prefix(job_id))
    )
    assert sorted(m.decode() for m in held_members) == sorted(f"held:{i}" for i in held)

    # other jobs are not affected
    other = app.tasks["brk.t"].enqueue()
    assert [x.iid for x in lease(app)] == [other.id]

    # cancel of held work, then resume releases the rest
    assert app.broker.cancel(held[0]).state == "cancelled"
    app.jobs.resume("flaky")
    assert job(app, job_id)["breaker"] == ""
    assert app.jobs.open_breakers() == []
    assert sorted(x.iid for x in lease(app)) == sorted(held[1:])
    assert app.jobs.events(kind="breaker")[0].type == "breaker_closed"


def test_the_window_keeps_its_minutes_only(app: App) -> None:
    """The job hash's breaker_minutes holds the attempts per minute of the
    window, and drops a minute as it leaves: a failure long ago does not count,
    and the field does not grow with the job's age."""
    app.jobs.put(
        "flaky",
        tasks={"t": Task("brk.t")},
        overlap="allow",
        breaker_threshold=0.75,
        breaker_min_attempts=4,
        breaker_window_s=120,  # this minute and the one before
    )
    job_id = app.jobs.job_id("flaky")
    m0 = server_ms(app) // 60_000
    t = m0 * 60_000

    def fail_at(minute: int, n: int) -> None:
        for _ in range(n):
            app.jobs.trigger("flaky")
        now = t + (minute - m0) * 60_000
        fail_all(app, lease(app, now=now), now=now)

    fail_at(m0, 2)
    assert job(app, job_id)["breaker_minutes"] == f"{m0}:2:2"
    fail_at(m0 + 1, 1)
    assert job(app, job_id)["breaker_minutes"] == f"{m0}:2:2,{m0 + 1}:1:1"
    fail_at(m0 + 5, 1)  # 4 failed attempts in all, but 1 in the window
    assert job(app, job_id)["breaker_minutes"] == f"{m0 + 5}:1:1"
    assert job(app, job_id).get("breaker", "") == ""
    fail_at(m0 + 6, 3)
    assert job(app, job_id)["breaker_minutes"] == f"{m0 + 5}:1:1,{m0 + 6}:3:3"
    assert job(app, job_id)["breaker"] == "open"


def test_cool_down_lets_one_trial_through(app: App) -> None:
    # time is passed in: the cool-down ends exactly when the test says so
    t = server_ms(app)
    job_id = make_job(app, cooldown=60)
    for _ in range(4):
        app.jobs.trigger("flaky")
    fail_all(app, lease(app, now=t), now=t)
    assert job(app, job_id)["breaker"] == "open"
    for _ in range(3):
        app.jobs.trigger("flaky")
    trial = lease(app, now=t + 60_000)
    assert len(trial) == 1  # one trial; the other two are held
    info = job(app, job_id)
    assert (info["breaker"], info["breaker_trial"]) == ("trial", trial[0].iid)
    # the trial fails: open again (a new cool-down); the held work stays held
    fail_all(app, trial, now=t + 60_001)
    assert job(app, job_id)["breaker"] == "open"
    # next trial (a fresh run) after the second cool-down succeeds: closed, held work released
    app.jobs.trigger("flaky")
    trial2 = lease(app, now=t + 120_001)
    assert len(trial2) == 1
    app.broker.leases.complete(0, "w", [(trial2[0].iid, trial2[0].epoch, b"\xc0")], now=t + 120_002)
    follow(app)
    assert job(app, job_id)["breaker"] == ""
    assert len(lease(app, now=t + 120_003)) == 2
    kinds = [e.type for e in reversed(app.jobs.events(kind="breaker"))]
    assert kinds == [
        "breaker_opened",
        "breaker_trial",
        "breaker_reopened",
        "breaker_trial",
        "breaker_closed",
    ]


# -- every end of the trial (issue 7, bug 3) ----------------------------------------
# Explicit `now` throughout (lua_ops.Ops) and a cool-down no test waits out.

COOL_S = 3600
COOL_MS = COOL_S * 1000


class Brk:
    """A job with a breaker, driven through the scripts at a test-controlled now."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.ops = Ops(app.broker)
        self.r = app.broker.client
        self.job_id = make_job(app, cooldown=COOL_S)

    def trigger(self) -> str:
        return f"{self.app.jobs.trigger('flaky')}/t"

    def lease(self, n: int = 10) -> list[Tok]:
        return self.ops.lease("w", n, ttl=60_000)

    def trip(self) -> None:
        for _ in range(4):
            self.trigger()
        for tok in self.lease():
            assert self.ops.fail("w", tok, retryable=False) == "dead"
        assert self.breaker() == ("open", "", str(self.ops.now + COOL_MS))

    def breaker(self) -> tuple[str, str, str]:
        j = job(self.app, self.job_id)
        return j.get("breaker", ""), j.get("breaker_trial", ""), j.get("breaker_until", "")

    def state(self, iid: str) -> str:
        return self.ops.info(iid)["state"]

    def cool_down_timer(self) -> float | None:
        return self.r.zscore(self.app.broker.keys.timers(0), f"brk:{self.job_id}")

    def cancel(self, iid: str) -> TaskCancel:
        return task_cancel(iid, self.ops.run("cancel", [iid, self.ops.now]))

    def cancel_run(self, iid: str) -> RunCancel:
        run_id = iid.rsplit("/", 1)[0]
        return run_cancel(run_id, self.ops.run("run_cancel", [run_id, self.ops.now]))

    def cool_down(self) -> None:
        self.ops.now += COOL_MS

    def trial_from_a_new_run(self) -> Tok:
        """After the cool-down the first instance leased is the single trial."""
        self.cool_down()
        iid = self.trigger()
        [trial] = self.lease()
        assert trial.iid == iid
        assert self.breaker()[:2] == ("trial", iid)
        return trial


@pytest.fixture
def brk(app: App) -> Brk:
    return Brk(app)


def end_trial(brk: Brk, trial: Tok, how: str) -> None:
    if how == "task cancel, reported by the worker":
        assert brk.cancel(trial.iid).may_still_be_running
        assert brk.ops.fail("w", trial, outcome="cancelled", retryable=False) == 0  # refused
    elif how == "run cancel, reported by the worker":
        assert brk.cancel_run(trial.iid).running == (trial.iid.rsplit("/", 1)[1],)
        assert brk.ops.fail("w", trial, outcome="cancelled", retryable=False) == 0
    elif how == "cancelled while running, its worker silent":
        assert brk.cancel(trial.iid).may_still_be_running
        assert brk.ops.reap() == [0, -1, 0, 0]  # the cancel ended the lease already
    elif how == "dead-lettered":
        assert brk.ops.fail("w", trial, retryable=False) == "dead"
    else:
        raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    [
        "task cancel, reported by the worker",
        "run cancel, reported by the worker",
        "cancelled while running, its worker silent",
        "dead-lettered",
    ],
)
def test_a_leased_trial_that_does_not_succeed_reopens_the_breaker(brk: Brk, how: str) -> None:
    brk.trip()
    held = brk.trigger()
    assert brk.lease() == []
    trial = brk.trial_from_a_new_run()
    end_trial(brk, trial, how)
    # open again with a fresh cool-down (not stuck in 'trial' with nothing to report)
    assert brk.breaker() == ("open", "", str(brk.ops.now + COOL_MS))
    assert brk.cool_down_timer() == brk.ops.now + COOL_MS
    assert brk.state(held) == "held"
    assert brk.lease() == []  # cool-down not over: new work is held too
    # the next trial succeeds: closed, the held work released
    trial2 = brk.trial_from_a_new_run()
    assert brk.ops.complete("w", [trial2]) == [1]
    assert brk.breaker()[0] == ""
    assert brk.cool_down_timer() is None
    assert {t.iid for t in brk.lease()} >= {held}


def test_a_trial_handed_back_at_shutdown_lets_the_next_lease_pick_a_new_trial(brk: Brk) -> None:
    brk.trip()
    held = brk.trigger()
    assert brk.lease() == []
    trial = brk.trial_from_a_new_run()
    assert brk.ops.release("w", [trial]) == 1
    # the cool-down was served and the task did nothing wrong: due at once
    assert brk.breaker() == ("open", "", str(brk.ops.now))
    assert brk.state(trial.iid) == "ready"
    [again] = brk.lease()
    assert again.iid == trial.iid
    assert brk.breaker()[:2] == ("trial", trial.iid)
    assert brk.ops.complete("w", [again]) == [1]
    assert brk.breaker()[0] == ""
    assert [t.iid for t in brk.lease()] == [held]


def test_held_work_gets_its_trial_when_the_cool_down_is_due(brk: Brk) -> None:
    # no new run comes in: the cool-down timer alone moves the held work on
    brk.trip()
    first, second = brk.trigger(), brk.trigger()
    assert brk.lease() == []
    assert brk.ops.promote() == [0, brk.ops.now + COOL_MS]  # not due yet
    brk.cool_down()
    brk.ops.promote()
    assert brk.breaker()[:2] == ("trial", first)
    assert (brk.state(first), brk.state(second)) == ("ready", "held")
    [trial] = brk.lease()
    assert trial.iid == first
    assert brk.ops.complete("w", [trial]) == [1]
    assert brk.breaker()[0] == ""
    assert [t.iid for t in brk.lease()] == [second]


@pytest.mark.parametrize("how", ["task cancel", "run cancel"])
def test_a_ready_trial_cancelled_reopens_the_breaker_and_the_next_held_task_is_tried(
    brk: Brk, how: str
) -> None:
    brk.trip()
    first, second = brk.trigger(), brk.trigger()
    assert brk.lease() == []
    brk.cool_down()
    brk.ops.promote()
    assert brk.breaker()[:2] == ("trial", first)
    if how == "task cancel":
        assert brk.cancel(first).state == "cancelled"
    else:
        done = brk.cancel_run(first)
        assert (done.state, done.cancelled, done.running) == ("cancelled", True, ())
    assert brk.breaker() == ("open", "", str(brk.ops.now + COOL_MS))
    assert brk.lease() == []
    brk.cool_down()
    brk.ops.promote()
    assert brk.breaker()[:2] == ("trial", second)
    [trial] = brk.lease()
    assert trial.iid == second


def test_a_trial_whose_instance_is_gone_is_replaced(brk: Brk) -> None:
    brk.trip()
    trial = brk.trial_from_a_new_run()
    # its hash disappears (deleted by hand, expired...): it can never report
    brk.r.delete(brk.app.broker.keys.ti(0, trial.iid))
    nxt = brk.trigger()
    assert [t.iid for t in brk.lease()] == [nxt]
    assert brk.breaker()[:2] == ("trial", nxt)
