"""Circuit breaker per job (DESIGN §7): trips on the failed share of attempts,
holds the job's queued work aside, reopens through one trial task or resume."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from redcron import App
from redcron.broker import FailItem
from redcron.jobs import Task


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))

    @a.task(name="brk.t", retries=0)
    def t() -> None: ...

    yield a
    a.close()


def make_job(app: App, cooldown: float = 60.0) -> str:
    app.job(
        "flaky",
        tasks={"t": Task("brk.t")},
        overlap="allow",
        breaker_threshold=0.75,
        breaker_min_attempts=4,
        breaker_cooldown_s=cooldown,
    )
    return app.jobs.job_id("default", "flaky")


def lease(app: App, n: int = 10, now: int | None = None) -> list:  # type: ignore[type-arg]
    return app.broker.lease(0, "w", n, 600_000, ["default"], now=now)


def fail_all(app: App, leases: list, now: int | None = None) -> None:  # type: ignore[type-arg]
    items = [FailItem(x.iid, x.epoch, "failed", "boom", False) for x in leases]
    app.broker.fail(0, "w", items, now=now)


def server_ms(app: App) -> int:
    sec, usec = app.broker.client.time()
    return int(sec) * 1000 + int(usec) // 1000


def job(app: App, job_id: str) -> dict[str, str]:
    return {
        k.decode(): v.decode()
        for k, v in app.broker.client.hgetall(app.broker.keys.job(0, job_id)).items()
        if not k.startswith(b"args:")
    }


def test_trips_holds_and_resume_releases(app: App) -> None:
    job_id = make_job(app)
    runs = [app.jobs.trigger("default", "flaky") for _ in range(4)]
    got = lease(app)
    assert len(got) == 4
    fail_all(app, got[:3])
    assert job(app, job_id).get("breaker", "") == ""  # 3 of 3 failed, but fewer than 4 attempts
    fail_all(app, got[3:])
    assert job(app, job_id)["breaker"] == "open"
    assert [e["type"] for e in app.jobs.events()] == ["breaker_opened"]
    assert all(app.jobs.run(r)["state"] == "failed" for r in runs)

    held_runs = [app.jobs.trigger("default", "flaky") for _ in range(3)]
    assert lease(app) == []  # the job's work is held, not handed out
    held = [f"{r}/t" for r in held_runs]
    assert [app.broker.task_info(i)["state"] for i in held] == ["held"] * 3
    assert app.broker.client.llen(app.broker.keys.held(0, job_id)) == 3

    # other jobs are not affected
    other = app.tasks["brk.t"].enqueue()
    assert [x.iid for x in lease(app)] == [other.id]

    # cancel of held work, then resume releases the rest
    assert app.broker.cancel(held[0]) == "cancelled"
    app.jobs.resume("default", "flaky")
    assert job(app, job_id)["breaker"] == ""
    assert sorted(x.iid for x in lease(app)) == sorted(held[1:])
    assert app.jobs.events()[0]["type"] == "breaker_closed"


def test_cool_down_lets_one_trial_through(app: App) -> None:
    # time is passed in: the cool-down ends exactly when the test says so
    t = server_ms(app)
    job_id = make_job(app, cooldown=60)
    for _ in range(4):
        app.jobs.trigger("default", "flaky")
    fail_all(app, lease(app, now=t), now=t)
    assert job(app, job_id)["breaker"] == "open"
    for _ in range(3):
        app.jobs.trigger("default", "flaky")
    trial = lease(app, now=t + 60_000)
    assert len(trial) == 1  # one trial; the other two are held
    info = job(app, job_id)
    assert (info["breaker"], info["breaker_trial"]) == ("trial", trial[0].iid)
    # the trial fails: open again (a new cool-down); the held work stays held
    fail_all(app, trial, now=t + 60_001)
    assert job(app, job_id)["breaker"] == "open"
    # next trial (a fresh run) after the second cool-down succeeds: closed, held work released
    app.jobs.trigger("default", "flaky")
    trial2 = lease(app, now=t + 120_001)
    assert len(trial2) == 1
    app.broker.complete(0, "w", [(trial2[0].iid, trial2[0].epoch, b"\xc0")], now=t + 120_002)
    assert job(app, job_id)["breaker"] == ""
    assert len(lease(app, now=t + 120_003)) == 2
    kinds = [e["type"] for e in reversed(app.jobs.events())]
    assert kinds == [
        "breaker_opened",
        "breaker_trial",
        "breaker_reopened",
        "breaker_trial",
        "breaker_closed",
    ]
