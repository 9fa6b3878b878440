"""The App / task / enqueue API without a worker: validation at the edge writes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.crc import key_slot

from redcron import App, Settings, Task, TaskFailed, TaskTimeout, ValidationError
from redcron.engine import FailItem
from redcron.errors import ConfigError, NotFound
from redcron.keys import shard_of


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(settings=Settings(redis_url=redis_url, prefix=key_prefix.rstrip(":")))
    yield a
    a.close()


@pytest.fixture
def written(r: redis.Redis, key_prefix: str) -> Callable[[], list[str]]:
    """Keys under the test prefix, except the deployment meta key."""

    def keys() -> list[str]:
        meta = key_prefix + "{g}:meta"
        return sorted(
            k.decode()
            for k in r.scan_iter(match=f"{key_prefix}*", count=1000)
            if k.decode() != meta
        )

    return keys


def add(x: int, y: int = 0) -> int:
    return x + y


def _expect_field(field: str, call: Callable[[], Any]) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        call()
    assert info.value.field == field, info.value
    assert str(info.value).startswith(f"{field}: ")
    return info.value


def test_unknown_task_name(app: App, written: Callable[[], list[str]]) -> None:
    app.task(add, name="math.add")
    exc = _expect_field("task", lambda: app.enqueue("math.sub", 1))
    assert "math.sub" in str(exc)
    assert "math.add" in str(exc)  # says what is registered
    assert written() == []


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((object(),), {}), ((1,), {"y": {1, 2}}), ((2**80,), {}), ((lambda: 1,), {})],
)
def test_non_serializable_args(
    app: App, written: Callable[[], list[str]], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    t = app.task(add, name="add")
    exc = _expect_field("args", lambda: t.enqueue(*args, **kwargs))
    assert "msgpack" in str(exc)
    assert written() == []


@pytest.mark.parametrize("tenant", ["a{b", "a}b", "{s0}", "a b", " ", "a:b", "", "x" * 65])
def test_bad_tenant_names(app: App, written: Callable[[], list[str]], tenant: str) -> None:
    _expect_field("tenant", lambda: app.task(add, name=f"add-{tenant}", tenant=tenant))
    assert "add-" + tenant not in app.tasks
    t = app.task(add, name="add")
    if tenant:
        _expect_field("tenant", lambda: t.enqueue(1, _tenant=tenant))
    assert written() == []


@pytest.mark.parametrize(
    ("opt", "field"), [("_tenant", "tenant"), ("_queue", "queue"), ("_priority", "priority")]
)
def test_empty_override_is_refused(
    app: App, written: Callable[[], list[str]], opt: str, field: str
) -> None:
    t = app.task(add, name="add")
    _expect_field(field, lambda: t.enqueue(1, **{opt: ""}))
    assert written() == []


@pytest.mark.parametrize("queue", ["q{1}", "my queue", "a:b"])
def test_bad_queue_names(app: App, written: Callable[[], list[str]], queue: str) -> None:
    _expect_field("queue", lambda: app.task(add, name="add", queue=queue))
    t = app.task(add, name="add2")
    _expect_field("queue", lambda: t.enqueue(1, _queue=queue))
    assert written() == []


@pytest.mark.parametrize("timeout", [-1, -0.5, "10", True])
def test_bad_timeout(app: App, written: Callable[[], list[str]], timeout: Any) -> None:
    _expect_field("timeout", lambda: app.task(add, name="slow", timeout=timeout))
    assert "slow" not in app.tasks
    t = app.task(add, name="add")
    _expect_field("timeout", lambda: t.enqueue(1, _timeout=timeout))
    assert written() == []


def test_unknown_per_call_option(app: App, written: Callable[[], list[str]]) -> None:
    t = app.task(add, name="add")
    exc = _expect_field("_tenat", lambda: t.enqueue(1, _tenat="acme"))
    assert "_tenant" in str(exc)  # lists the known ones
    _expect_field("_delay", lambda: t.enqueue_many([(1,)], _delay=3))
    assert written() == []


@pytest.mark.parametrize("priority", ["urgent", "HIGH", "", 1])
def test_bad_priority(app: App, written: Callable[[], list[str]], priority: Any) -> None:
    if priority != "":
        _expect_field("priority", lambda: app.task(add, name="p", priority=priority))
        t = app.task(add, name="add")
        _expect_field("priority", lambda: t.enqueue(1, _priority=priority))
    else:
        _expect_field("priority", lambda: app.task(add, name="p", priority=priority))
    assert written() == []


@pytest.mark.parametrize(
    ("opt", "value"),
    [("_retries", -1), ("_retries", 1.5), ("_countdown", -3), ("_countdown", "soon")],
)
def test_bad_retries_and_countdown(
    app: App, written: Callable[[], list[str]], opt: str, value: Any
) -> None:
    t = app.task(add, name="add")
    field = "retries" if opt == "_retries" else "countdown"
    _expect_field(field, lambda: t.enqueue(1, **{opt: value}))
    _expect_field("retries", lambda: app.task(add, name="r", retries=-1))
    assert written() == []


def test_one_bad_call_in_a_batch_writes_nothing(app: App, written: Callable[[], list[str]]) -> None:
    t = app.task(add, name="add")
    calls = [(i,) for i in range(300)] + [(object(),)]
    _expect_field("args", lambda: t.enqueue_many(calls))
    assert written() == []


def test_arguments_that_do_not_fit_the_function_are_refused_before_anything_is_written(
    app: App, written: Callable[[], list[str]]
) -> None:
    # issue 16 item 9: an unknown keyword was enqueued, then retried into the DLQ
    t = app.task(add, name="math.add")

    @app.task(name="math.scale")
    def scale(ctx: object, x: int, *, by: int) -> int:
        return x * by

    exc = _expect_field("kwargs.z", lambda: t.enqueue(1, z=3))
    assert "add() got an unexpected keyword argument 'z'" in str(exc)
    _expect_field("kwargs.z", lambda: app.enqueue("math.add", 1, z=3))
    _expect_field("args", lambda: app.enqueue("math.add"))  # x is missing
    _expect_field("args", lambda: app.enqueue("math.add", 1, 2, 3))
    _expect_field("kwargs.x", lambda: app.enqueue("math.add", 1, x=1))
    _expect_field("calls[1].args", lambda: t.enqueue_many([(1,), (1, 2, 3)]))
    # the ctx parameter is the worker's to pass, never the caller's
    exc = _expect_field("kwargs.by", lambda: app.enqueue("math.scale", 2))
    assert "missing a required argument: 'by'" in str(exc)
    _expect_field("args", lambda: app.enqueue("math.scale", "ctx", 2, by=3))
    assert written() == []
    # what fits is enqueued, options aside
    assert app.enqueue("math.scale", 2, by=3, _countdown=60).state == "scheduled"
    assert t.enqueue(x=1, y=2).state == "ready"


def test_duplicate_task_name_is_refused(app: App) -> None:
    app.task(add, name="add")
    _expect_field("name", lambda: app.task(add, name="add"))


def test_a_name_given_as_the_decorators_argument_says_it_is_a_keyword(app: App) -> None:
    with pytest.raises(TypeError, match=r"@app.task\(name='shop.resize'\)"):
        app.task("shop.resize")  # type: ignore[call-overload]
    assert "shop.resize" not in app.tasks


def test_bad_command_argv(app: App, written: Callable[[], list[str]]) -> None:
    for argv in ([], "echo hi", [1, 2], ["ok", None]):
        _expect_field("argv", lambda argv=argv: app.enqueue_command(argv))  # type: ignore[misc]
    _expect_field("tenant", lambda: app.enqueue_command(["true"], tenant="a b"))
    assert written() == []


def test_enqueue_many_crosses_the_batch_size(app: App, r: redis.Redis) -> None:
    t = app.task(add, name="add", tenant="bulk")
    handles = t.enqueue_many([(i, i) for i in range(1000)])
    assert len({h.id for h in handles}) == 1000
    keys = app.broker.keys
    assert r.xlen(keys.q(0, "default", "bulk", "normal")) == 1000
    states = {h.state for h in handles[::97]} | {handles[-1].state}
    assert states == {"ready"}
    # the 1000 are all handed out, each once
    seen: set[str] = set()
    while batch := app.broker.leases.lease(0, "w1", 256, 60_000, ["default"]):
        seen.update(x.iid for x in batch)
    assert seen == {h.id for h in handles}


def test_enqueue_many_with_options(app: App, r: redis.Redis) -> None:
    t = app.task(add, name="add")
    handles = t.enqueue_many([(1,), (2,)], _tenant="acme", _priority="high", _countdown=30)
    for h in handles:
        info = h.info()
        assert (info.tenant, info.priority, info.state) == ("acme", "high", "scheduled")


def test_tasks_land_on_their_tenants_shard(redis_url: str, key_prefix: str, r: redis.Redis) -> None:
    app = App(settings=Settings(redis_url=redis_url, prefix=key_prefix.rstrip(":"), shards=4))
    try:
        t = app.task(add, name="add")
        tenants = ["acme", "globex", "initech", "umbrella", "hooli", "stark"]
        for tenant in tenants:
            h = t.enqueue(1, _tenant=tenant)
            shard = shard_of(tenant, 4)
            assert h.id.startswith(f"{shard}-")
            assert h.info().shard == shard
            assert r.exists(app.broker.keys.ti(shard, h.id)) == 1
        assert len({shard_of(x, 4) for x in tenants}) > 1
        meta = key_prefix + "{g}:meta"
        for key in r.scan_iter(match=f"{key_prefix}*"):
            if key.decode() == meta:
                continue
            shard = int(key.decode().split("{s", 1)[1].split("}", 1)[0])
            assert key_slot(key) == key_slot(app.broker.keys.shard(shard).encode())
    finally:
        app.close()


def test_handle_state_attempts_info(app: App) -> None:
    t = app.task(
        add, name="math.add", retries=4, timeout=2.5, tenant="acme", queue="maths", priority="low"
    )
    h = t.enqueue(2, y=3)
    assert h.state == "ready"
    assert h.attempts == 0
    info = h.info()
    assert info.name == "math.add"
    assert (info.tenant, info.queue, info.priority) == ("acme", "maths", "low")
    assert info.timeout_s == 2.5
    assert info.max_attempts == 5
    assert info.attempts == ()
    assert app.get(h.id).state == "ready"
    [lease] = app.broker.leases.lease(0, "w1", 1, 60_000, ["maths"])
    assert lease.name == "math.add"
    assert h.state == "leased"
    assert h.attempts == 1


def test_per_call_options_override_declared_ones(app: App) -> None:
    t = app.task(add, name="add", retries=1, timeout=5)
    h = t.enqueue(
        1, _retries=0, _timeout=0, _priority="high", _queue="other", _tenant="t2", _countdown=60
    )
    info = h.info()
    assert info.max_attempts == 1
    assert info.timeout_s is None  # 0: no timeout
    assert (info.priority, info.queue, info.tenant) == ("high", "other", "t2")
    assert info.state == "scheduled"


def test_result_times_out_on_unprocessed_task(app: App) -> None:
    t = app.task(add, name="add")
    h = t.enqueue(1)
    with pytest.raises(TaskTimeout):
        h.result(timeout=0.2)
    assert h.state == "ready"


def test_result_of_a_completed_task(app: App) -> None:
    t = app.task(add, name="add")
    h = t.enqueue(1)
    [lease] = app.broker.leases.lease(0, "w1", 1, 60_000, ["default"])
    app.broker.leases.complete(0, "w1", [(lease.iid, lease.epoch, b"\x2a")])
    assert h.result(timeout=1) == 42


def test_result_of_a_dead_task_raises_with_the_error(app: App) -> None:
    t = app.task(add, name="add")
    h = t.enqueue(1)
    [lease] = app.broker.leases.lease(0, "w1", 1, 60_000, ["default"])
    app.broker.leases.fail(
        0, "w1", [FailItem(lease.iid, lease.epoch, "failed", "KeyError: x", False)]
    )
    with pytest.raises(TaskFailed) as info:
        h.result(timeout=1)
    assert info.value.state == "dead"
    assert info.value.error == "KeyError: x"


def test_unknown_or_malformed_ids(app: App) -> None:
    with pytest.raises(NotFound):
        app.get("no-shard-here")
    with pytest.raises(NotFound):
        app.get("0-01ARYZ6S410000000000000000").info()


def test_calling_a_task_runs_it_locally(app: App, written: Callable[[], list[str]]) -> None:
    t = app.task(add, name="add")
    assert t(2, y=3) == 5
    assert written() == []


def test_the_shard_count_is_the_deployments_and_a_change_is_refused(
    redis_url: str, key_prefix: str
) -> None:
    """The count is stored at first use; unset reads it, another count is refused
    (every tenant's shard would change under its queued work)."""
    prefix = key_prefix.rstrip(":")
    first = App(redis_url, prefix=prefix, shards=4)
    unset = App(redis_url, prefix=prefix)
    other = App(redis_url, prefix=prefix, shards=2)
    try:
        assert first.broker.shards == 4
        assert unset.broker.shards == 4
        with pytest.raises(ConfigError) as err:
            other.broker.shards  # noqa: B018 (the read is the check)
        text = str(err.value)
        assert "4 shard(s), not 2" in text and "Changing the shard count" in text
        fresh = App(redis_url, prefix=prefix + "n")
        assert fresh.broker.shards == 1  # a new deployment: 1 by default
        fresh.close()
    finally:
        for a in (first, unset, other):
            a.close()


# -- the jobs API: one argument order (issue 29) ---------------------------------------


def test_every_job_method_takes_the_name_then_the_tenant_as_put_does(app: App) -> None:
    # put took (name, tenant=...) and the rest (tenant, name)
    put = app.jobs.put(
        "ordered", tenant="acme", every="1h", tasks={"t": Task("x.y")}, allow_unregistered=True
    )
    jobs = app.jobs
    assert jobs.job_id("ordered", tenant="acme") == put.id
    assert jobs.get("ordered", tenant="acme").id == put.id
    jobs.pause("ordered", tenant="acme")
    assert jobs.get("ordered", tenant="acme").paused
    jobs.resume("ordered", tenant="acme")
    assert not jobs.get("ordered", tenant="acme").paused
    run_id = jobs.trigger("ordered", tenant="acme", params={"day": 1})
    assert jobs.run(run_id).job_id == put.id
    assert jobs.delete("ordered", tenant="acme") == put.id
    # the tenant defaults as put's does
    jobs.put("mine", every="1h", tasks={"t": Task("x.y")}, allow_unregistered=True)
    assert jobs.get("mine").tenant == "default"
    assert jobs.run(jobs.trigger("mine")).job_id == jobs.job_id("mine")


def test_the_old_order_still_works_with_a_deprecation_warning(app: App) -> None:
    put = app.jobs.put(
        "old", tenant="acme", every="1h", tasks={"t": Task("x.y")}, allow_unregistered=True
    )
    jobs = app.jobs
    with pytest.warns(DeprecationWarning, match=r"call jobs\.get\(name, tenant=tenant\)"):
        assert jobs.get("acme", "old").id == put.id
    with pytest.warns(DeprecationWarning, match=r"jobs\.pause\(tenant, name\) is deprecated"):
        jobs.pause("acme", "old")
    with pytest.warns(DeprecationWarning):
        jobs.resume("acme", "old")
    with pytest.warns(DeprecationWarning):
        run_id = jobs.trigger("acme", "old", {"day": 2})  # params third, as it was
    assert jobs.run(run_id).job_id == put.id
    with pytest.raises(TypeError, match="give the tenant once"):
        jobs.get("acme", "old", tenant="acme")
    with pytest.warns(DeprecationWarning):
        assert jobs.delete("acme", "old") == put.id
