"""Worker capacity: tasks that ask for cpu/mem are leased only to a worker they
fit, and a worker never runs more than it declared."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from redcron import App, Context, ValidationError
from redcron.model.jobs import JobSpec, Task
from redcron.worker import Worker


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)
    yield a
    a.close()


def lease_ids(app: App, capacity: tuple[float | None, int | None], n: int = 10) -> list[str]:
    return [x.iid for x in app.broker.leases.lease(0, "w", n, 60_000, ["default"], (), capacity)]


def test_tasks_are_leased_only_while_they_fit(app: App) -> None:
    @app.task(name="cap.one", cpu=1, mem="1G")
    def one() -> None: ...

    hs = one.enqueue_many([()] * 3)
    got = lease_ids(app, (2.0, 8 * 1024**3))
    assert got == [h.id for h in hs[:2]]  # 2 cpus: two tasks of 1 cpu
    assert lease_ids(app, (0.5, None)) == []  # what is left does not fit
    assert lease_ids(app, (None, 512 * 1024**2)) == []  # nor 512M of memory
    assert lease_ids(app, (1.0, 1024**3)) == [hs[2].id]
    info = app.broker.inspection.task_info(hs[0].id)
    assert (info.cpu, info.mem) == (1.0, 1024**3)


def test_a_big_task_waits_for_a_worker_it_fits_while_others_go_on(app: App) -> None:
    @app.task(name="cap.big", cpu=4)
    def big() -> None: ...

    @app.task(name="cap.any")
    def anything() -> None: ...

    b = big.enqueue(_tenant="heavy")
    a = anything.enqueue(_tenant="light")
    assert lease_ids(app, (2.0, None)) == [a.id]  # no requests: fits anywhere
    assert app.get(b.id).state == "ready"
    assert lease_ids(app, (8.0, None)) == [b.id]


def test_per_call_and_job_requests_and_their_validation(app: App) -> None:
    @app.task(name="cap.t")
    def t() -> None: ...

    h = t.enqueue(_cpu=2, _mem="256M")
    info = app.broker.inspection.task_info(h.id)
    assert (info.cpu, info.mem) == (2.0, 256 * 1024**2)
    for opts, field in (({"_cpu": 0}, "_cpu"), ({"_mem": "lots"}, "_mem")):
        with pytest.raises(ValidationError) as exc:
            t.enqueue(**opts)
        assert exc.value.field == field
    app.jobs.put(JobSpec(name="j", tasks={"x": Task("cap.t", cpu=3, mem="1G")}))
    rid = app.jobs.trigger("j")
    info = app.broker.inspection.task_info(f"{rid}/x")
    assert (info.cpu, info.mem) == (3.0, 1024**3)


def test_a_worker_never_runs_more_than_its_capacity(app: App) -> None:
    counter = f"{app.settings.prefix}:x:running"
    peak = f"{app.settings.prefix}:x:peak"

    @app.task(name="cap.work", cpu=1)
    def work(ctx: Context) -> None:
        assert ctx.broker is not None
        client = ctx.broker.client
        now = client.incr(counter)
        client.eval(
            "if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then "
            "redis.call('SET', KEYS[1], ARGV[1]) end",
            1,
            peak,
            now,
        )
        time.sleep(0.2)
        client.decr(counter)

    hs = work.enqueue_many([()] * 6)
    w = Worker(app, concurrency=8, cpus=2, lease_ttl=2.0)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    try:
        for h in hs:
            h.result(timeout=20)
    finally:
        w.stop()
        t.join(10)
    assert int(app.broker.client.get(peak) or 0) == 2
