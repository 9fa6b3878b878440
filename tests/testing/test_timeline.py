"""The testing mode on production's clock: ``advance`` and
``drain(with_scheduled=...)`` live through test time as a beat and workers
would, running each fire, countdown and retry when it falls due, in time
order (src/redcron/testing/timeline.py).  No Redis server."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from redcron import Retry, Task
from redcron.testing import TestApp

T0 = datetime(2027, 1, 4, 0, 0, tzinfo=UTC)
HOUR = 3600
DAY = 86_400


@pytest.fixture
def app() -> Iterator[TestApp]:
    with TestApp(now=T0) as test_app:
        yield test_app


def _times(instants: list[datetime]) -> list[str]:
    return [str(t - T0) for t in instants]


def test_an_hourly_job_advanced_three_hours_runs_three_times(app: TestApp) -> None:
    ran: list[datetime] = []

    @app.task
    def tick() -> None:
        ran.append(app.now)

    app.job("hourly", cron="0 * * * *", tasks={"t": Task(tick.name)})  # overlap "skip"
    done = app.advance(3 * HOUR)
    # each run ended before the next fire: none was skipped as overlapping
    assert (done.succeeded, done.failed) == (3, 0)
    assert [str(r.state) for r in app.runs("hourly")] == ["succeeded"] * 3
    assert _times(ran) == ["1:00:00", "2:00:00", "3:00:00"]  # each at its fire time
    assert app.now == T0 + timedelta(hours=3)
    assert app.drain().attempts == 0  # nothing was left for a drain


def test_a_daily_job_advanced_four_days_runs_four_times(app: TestApp) -> None:
    @app.task
    def nightly() -> str:
        return "done"

    app.job("nightly", cron="30 2 * * *", tasks={"t": Task(nightly.name)})
    assert app.advance(4 * DAY).succeeded == 4
    runs = app.runs("nightly")
    assert [str(r.state) for r in runs] == ["succeeded"] * 4
    assert [r.scheduled_for for r in runs] == [
        T0 + timedelta(days=d, hours=2, minutes=30) for d in range(4)
    ]


def test_run_false_only_fires_as_advance_did_before(app: TestApp) -> None:
    @app.task
    def nightly() -> None: ...

    app.job("nightly", cron="30 2 * * *", tasks={"t": Task(nightly.name)})
    assert app.advance(4 * DAY, run=False).attempts == 0
    # no worker ran the first night's run: the overlap policy ("skip") skips the rest
    states = [str(r.state) for r in app.runs("nightly")]
    assert states == ["queued", "skipped", "skipped", "skipped"]
    assert app.drain().succeeded == 1


def test_retries_run_when_their_backoff_ends_during_advance(app: TestApp) -> None:
    calls: list[datetime] = []

    @app.task(retries=3, retry_base=10)
    def flaky() -> str:
        calls.append(app.now)
        if len(calls) < 3:
            raise RuntimeError("upstream down")
        return "up"

    handle = flaky.enqueue()
    done = app.advance(HOUR)
    assert (done.succeeded, done.failed, done.retried, done.dead) == (1, 2, 2, 0)
    assert handle.result() == "up" and app.now == T0 + timedelta(hours=1)
    assert calls[0] == T0 < calls[1] < calls[2] < T0 + timedelta(minutes=5)
    # the same times as a drain that steps from retry to retry (the jitter is seeded)
    with TestApp(now=T0) as twin:
        again: list[datetime] = []

        @twin.task(name=flaky.name, retries=3, retry_base=10)
        def flaky_twin() -> str:
            again.append(twin.now)
            if len(again) < 3:
                raise RuntimeError("upstream down")
            return "up"

        flaky_twin.enqueue()
        assert twin.drain(with_scheduled=True).succeeded == 1
    assert again == calls


def test_a_retry_delay_and_a_countdown_run_on_time(app: TestApp) -> None:
    ran: list[tuple[str, timedelta]] = []

    @app.task(retries=1)
    def polite() -> None:
        ran.append(("polite", app.now - T0))
        if len(ran) == 1:
            raise Retry("later", delay=90)

    @app.task
    def later() -> None:
        ran.append(("later", app.now - T0))

    polite.enqueue()
    later.enqueue(_countdown=60)
    assert app.advance(HOUR).succeeded == 2
    assert ran == [
        ("polite", timedelta(0)),
        ("later", timedelta(seconds=60)),
        ("polite", timedelta(seconds=90)),
    ]


def test_fires_of_two_jobs_run_in_time_order(app: TestApp) -> None:
    ran: list[tuple[str, str]] = []

    @app.task
    def note(job: str) -> None:
        ran.append((job, str(app.now - T0)))

    app.job("twenty", cron="*/20 * * * *", tasks={"t": Task(note.name, args=["twenty"])})
    app.job("ten-past", cron="10 * * * *", tasks={"t": Task(note.name, args=["ten-past"])})
    app.job(
        "once",
        at=T0 + timedelta(minutes=45),
        tasks={"t": Task(note.name, args=["once"])},
    )
    assert app.advance(HOUR + 15 * 60).succeeded == 6
    assert ran == [
        ("ten-past", "0:10:00"),
        ("twenty", "0:20:00"),
        ("twenty", "0:40:00"),
        ("once", "0:45:00"),
        ("twenty", "1:00:00"),
        ("ten-past", "1:10:00"),
    ]


def test_with_scheduled_datetime_moves_the_clock_with_nothing_scheduled(app: TestApp) -> None:
    until = T0 + timedelta(hours=5)
    assert app.drain(with_scheduled=until).attempts == 0
    assert app.now == until


def test_with_scheduled_true_runs_the_fires_on_the_way(app: TestApp) -> None:
    @app.task
    def tick() -> None: ...

    @app.task
    def reminder() -> None: ...

    app.job("hourly", cron="0 * * * *", tasks={"t": Task(tick.name)})
    reminder.enqueue(_countdown=3 * HOUR)
    # up to the last scheduled task; each fire on the way runs as it falls due
    assert app.drain(with_scheduled=True).succeeded == 4
    assert [str(r.state) for r in app.runs("hourly")] == ["succeeded"] * 3
    assert app.now == T0 + timedelta(hours=3)


def test_a_lease_held_elsewhere_is_reaped_when_it_expires(app: TestApp) -> None:
    @app.task(retries=1)
    def slow() -> None: ...

    handle = slow.enqueue()
    app.broker.leases.lease(0, "gone-worker", 1, 2_000, ["default"])  # a worker that died
    assert app.advance(HOUR).succeeded == 1
    first, second = handle.info().attempts
    assert (first.outcome, second.outcome) == ("lost", "succeeded")
    # reaped once its 2 s lease had expired, long before the hour was up
    assert second.leased_at is not None and second.leased_at < T0 + timedelta(minutes=1)


def test_a_run_past_its_deadline_is_marked_late_at_the_deadline(app: TestApp) -> None:
    @app.task(retries=1)
    def slow_start() -> None:
        if app.now == T0 + timedelta(hours=1):
            raise Retry("not yet", delay=600)

    app.job("hourly", cron="0 * * * *", deadline_s=120, tasks={"t": Task(slow_start.name)})
    assert app.advance(HOUR + 30 * 60).succeeded == 1
    (run,) = app.runs("hourly")
    # still going (its task in a 10-minute retry delay) when its deadline came
    assert run.late_at == run.deadline_at == T0 + timedelta(hours=1, minutes=2)
    assert str(run.state) == "succeeded" and run.ended_at == T0 + timedelta(hours=1, minutes=10)


def test_the_step_cap_names_itself_and_how_to_raise_it() -> None:
    with TestApp(now=T0, max_steps=50) as app:

        @app.task
        def tick() -> None: ...

        app.job("minutely", cron="* * * * *", tasks={"t": Task(tick.name)})
        with pytest.raises(
            RuntimeError, match=r"more than 50 instants .*TestApp\(max_steps=\.\.\.\)"
        ):
            app.advance(HOUR)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_week_of_a_minutely_job_runs_every_fire() -> None:
    ran: list[int] = []
    with TestApp(now=T0) as app:

        @app.task
        def tick() -> None:
            ran.append(1)

        app.job("minutely", cron="* * * * *", tasks={"t": Task(tick.name)})
        done = app.advance(7 * DAY)
        assert (done.succeeded, done.failed) == (7 * 24 * 60, 0)
        assert len(ran) == 10_080
        # the job's history keeps its last keep_runs (100), all of them run
        assert {str(r.state) for r in app.runs("minutely")} == {"succeeded"}
