"""The testing mode's helpers, with no Redis server (that is its point)."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from redcron import (
    App,
    ConfigError,
    Permanent,
    Retry,
    Task,
    TaskFailed,
    TaskTimeout,
    ValidationError,
)
from redcron.testing import TestApp, TestClock, fakeserver

T0 = datetime(2027, 1, 4, 9, 0, tzinfo=UTC)


@pytest.fixture
def app() -> Any:
    with TestApp(now=T0) as test_app:
        yield test_app


def test_enqueue_assert_drain_and_result(app: TestApp) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        print("adding", x, y)
        return x + y

    handle = add.enqueue(2, 3)
    record = app.assert_enqueued(add, args=[2, 3], tenant="default", within=0)
    assert record.id == handle.id
    app.refute_enqueued(add, args=[3, 2])
    drained = app.drain()
    assert (drained.succeeded, drained.failed, drained.attempts) == (1, 0, 1)
    assert handle.result() == 5
    assert handle.state == "succeeded" and handle.attempts == 1
    assert app.logs(handle.id) == ["adding 2 3"]
    app.refute_enqueued(add)


def test_assertion_messages_say_what_is_enqueued(app: TestApp) -> None:
    @app.task(name="mail")
    def mail(to: str, subject: str = "") -> None: ...

    mail.enqueue("ann@example.com", subject="hi")
    with pytest.raises(AssertionError, match=r"mail\('ann@example.com', subject='hi'\) ready"):
        app.assert_enqueued(mail, args=["bob@example.com"])
    with pytest.raises(AssertionError, match="1 enqueued task"):
        app.refute_enqueued("mail", kwargs={"subject": "hi"})
    assert [r.name for r in app.all_enqueued()] == ["mail"]


def test_a_countdown_waits_for_the_clock(app: TestApp) -> None:
    @app.task
    def later() -> str:
        return "done"

    handle = later.enqueue(_countdown=60)
    assert app.drain().attempts == 0
    app.assert_enqueued(later, within=60)
    app.refute_enqueued(later, within=59)
    assert app.advance(59.999).attempts == 0
    assert app.advance(0.001).succeeded == 1  # it runs as it falls due
    assert app.now == T0 + timedelta(seconds=60)
    assert handle.result() == "done"


def test_retries_then_dead_then_replay(app: TestApp) -> None:
    attempts: list[int] = []

    @app.task(retries=2, retry_base=5)
    def flaky() -> None:
        attempts.append(len(attempts) + 1)
        raise RuntimeError("boom")

    handle = flaky.enqueue()
    first = app.drain()
    assert (first.failed, first.retried, first.dead) == (1, 1, 0)
    assert handle.state == "retry_wait"
    rest = app.drain(with_scheduled=True)
    assert (rest.failed, rest.retried, rest.dead) == (2, 1, 1)
    assert handle.state == "dead" and attempts == [1, 2, 3]
    assert app.now > T0  # the backoffs elapsed in test time
    (entry,) = app.dlq("default")
    assert entry.task_id == handle.id and "boom" in (entry.error or "")
    with pytest.raises(TaskFailed, match="dead"):
        handle.result()


def test_with_scheduled_stops_at_its_datetime(app: TestApp) -> None:
    @app.task
    def ping() -> None: ...

    soon, late = ping.enqueue(_countdown=10), ping.enqueue(_countdown=100)
    assert app.drain(with_scheduled=T0 + timedelta(seconds=50)).succeeded == 1
    assert (soon.state, late.state) == ("succeeded", "scheduled")
    assert app.now == T0 + timedelta(seconds=50)  # the clock ends there, as advance's


def test_retry_and_permanent_from_the_task(app: TestApp) -> None:
    @app.task(retries=5)
    def polite() -> None:
        raise Retry("not yet", delay=30)

    @app.task(retries=5)
    def final() -> None:
        raise Permanent("never")

    p, f = polite.enqueue(), final.enqueue()
    drained = app.drain()
    assert (drained.retried, drained.dead) == (1, 1)
    assert p.info().due_at == T0 + timedelta(seconds=30)
    assert f.state == "dead"


def test_recursion_runs_what_tasks_enqueue(app: TestApp) -> None:
    @app.task
    def child(n: int) -> int:
        return n

    @app.task
    def parent(n: int) -> None:
        child.enqueue(n + 1)

    parent.enqueue(1)
    assert app.drain(with_recursion=False).succeeded == 1
    app.assert_enqueued(child, args=[2])
    parent.enqueue(5)
    assert app.drain().succeeded == 3  # parent(5), child(2), child(6)
    with pytest.raises(ConfigError, match="with_recursion"):
        app.drain(with_scheduled=True, with_recursion=False)


def test_drain_one_queue(app: TestApp) -> None:
    @app.task(queue="mail")
    def send() -> None: ...

    @app.task
    def other() -> None: ...

    send.enqueue()
    other.enqueue()
    assert app.drain("mail").succeeded == 1
    app.assert_enqueued(other)


def test_perform_round_trips_through_the_serializer(app: TestApp) -> None:
    @app.task
    def echo(value: Any) -> Any:
        return value

    @app.task
    def bad_result() -> Any:
        return {1, 2}

    @app.task
    def wants_ctx(ctx: Any, key: str) -> bool:
        return bool(ctx.once(key))

    assert app.perform(echo, (1, 2)) == [1, 2]  # a tuple comes back a list
    with pytest.raises(ValidationError, match="args: not serializable"):
        app.perform(echo, object())
    with pytest.raises(ValidationError, match="unexpected"):
        app.perform(echo, 1, nope=2)
    with pytest.raises(TaskFailed, match="result: not serializable"):
        app.perform(bad_result)
    assert app.perform(wants_ctx, "k") is True
    assert app.perform(echo.name, {"a": b"x"}) == {"a": b"x"}
    app.refute_enqueued()  # perform enqueues nothing


def test_perform_raises_the_task_error(app: TestApp) -> None:
    @app.task
    def divide(x: int) -> float:
        return 1 / x

    with pytest.raises(TaskFailed, match="ZeroDivisionError"):
        app.perform(divide, 0)
    with pytest.raises(ValidationError, match="unknown task 'nope'"):
        app.perform("nope")


def test_a_cron_job_fires_on_advance_and_its_dag_runs(app: TestApp) -> None:
    ran: list[str] = []

    @app.task
    def step(name: str) -> None:
        ran.append(name)

    app.job(
        "nightly",
        cron="0 2 * * *",
        tz="Europe/Paris",
        tasks={
            "extract": Task(step.name, args=["extract"]),
            "load": Task(step.name, args=["load"], depends_on=["extract"]),
        },
    )
    assert app.advance(86_400).succeeded == 2 and ran == ["extract", "load"]
    (run,) = app.runs("nightly")
    assert run.scheduled_for == datetime(2027, 1, 5, 1, 0, tzinfo=UTC)  # 02:00 in Paris
    assert [t.state for t in app.runs("nightly")[0].tasks or ()] == ["succeeded", "succeeded"]


def test_a_lease_expires_on_the_test_clock(app: TestApp) -> None:
    @app.task(retries=1)
    def slow() -> None: ...

    handle = slow.enqueue()
    (lease,) = app.broker.leases.lease(0, "gone-worker", 1, 2_000, ["default"])
    assert handle.state == "leased"
    app.advance(1, run=False)
    assert handle.state == "leased"
    app.advance(60, run=False)  # past the lease TTL: the reaper ends the attempt
    assert handle.state in ("ready", "retry_wait")
    assert app.drain(with_scheduled=True).succeeded == 1
    assert lease.iid == handle.id


def test_wrapping_an_app_routes_its_enqueues_to_the_fake() -> None:
    real = App(redis_url="redis://127.0.0.1:1/0")  # nothing listens there

    @real.task
    def greet(name: str) -> str:
        return f"hi {name}"

    with TestApp(real, now=T0) as app:
        handle = greet.enqueue("ann")  # the user's code, unchanged
        app.assert_enqueued(greet, args=["ann"])
        assert app.drain().succeeded == 1 and handle.result() == "hi ann"
    assert real._broker is None  # its own broker back (none built yet)


def test_the_clock_drives_time_and_ttls_but_only_for_our_clients(app: TestApp) -> None:
    client = app.broker.client
    assert client.time()[0] == int(T0.timestamp())
    client.set("k", "v", px=1_500)
    app.advance(1)
    assert client.get("k") == b"v"
    app.advance(1)
    assert client.get("k") is None
    fakeredis = pytest.importorskip("fakeredis")
    other = fakeredis.FakeRedis()
    assert abs(other.time()[0] - datetime.now(UTC).timestamp()) < 60


def test_the_clock_only_moves_forward(app: TestApp) -> None:
    with pytest.raises(ValueError, match="seconds must be >= 0"):
        app.advance(-1)
    with pytest.raises(ValueError, match="before the test clock"):
        app.advance(to=T0 - timedelta(seconds=1))
    with pytest.raises(ConfigError, match="no time zone"):
        TestClock(datetime(2027, 1, 1))


def test_pcall_errors_reach_scripts_as_strings(app: TestApp) -> None:
    client = app.broker.client
    client.set("str", "x")
    script = (
        "local r = redis.pcall('LPUSH', KEYS[1], 'v') "
        "return {type(r.err), string.find(r.err, 'WRONGTYPE', 1, true) ~= nil and 1 or 0}"
    )
    assert client.eval(script, 1, "str") == [b"string", 1]


def test_a_hand_made_stream_is_still_leased(app: TestApp) -> None:
    """lease.lua's NOGROUP path reads redis.pcall's err with string.find."""

    @app.task
    def job() -> None: ...

    handle = job.enqueue()
    keys = app.broker.keys
    stream = keys.q(0, "default", "default", "normal")
    client = app.broker.client
    ((entry_id, fields),) = client.xrange(stream)
    client.delete(stream)  # the group goes with it; the entry is put back by hand
    client.xadd(stream, fields, id=entry_id)  # (the instance records its entry id)
    assert app.drain().succeeded == 1 and handle.state == "succeeded"


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find = importlib.util.find_spec

    def find(name: str, *args: Any) -> Any:
        return None if name in ("fakeredis", "lupa") else real_find(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find)
    with pytest.raises(ConfigError, match=r"pip install 'redcron\[testing\]'"):
        TestApp()
    with pytest.raises(ConfigError, match="fakeredis"):
        fakeserver.check_supported()


def test_every_client_speaks_resp2(app: TestApp) -> None:
    """fakeredis shapes replies inside a script by the caller's protocol."""
    assert app.broker.client.connection_pool.connection_kwargs["protocol"] == 2


def test_result_of_a_task_not_run_says_to_drain(app: TestApp) -> None:
    @app.task
    def later() -> None: ...

    handle = later.enqueue(_countdown=5)
    with pytest.raises(TaskTimeout, match=r"is scheduled: .*app.drain\(\)"):
        handle.result()
