"""Fan-out at run time (issue 32 §2), on real workers against real Redis: a
task mapped over a list its upstream returns makes one instance per element
(``transform[0]``, ``transform[1]``...), made page by page by maintenance from
the follow-up the upstream's success wrote; a task downstream of it joins
them (receives their results, in order).  Retries, the DLQ, cancel and run
retry apply to each instance."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from worker_procs import thread_workers, wait_for

from redcron import App, Context, Task
from redcron.model import RunRecord, TaskRecord
from redcron.worker import Worker

TENANT = "maps"
#: element values whose instance fails: once (retried), or always (dead-lettered)
FLAKY, BROKEN = 17, 503


@pytest.fixture
def fixed() -> list[bool]:
    """Set to [True] to let the always-failing element succeed (a fix deployed)."""
    return []


@pytest.fixture
def app(redis_url: str, key_prefix: str, fixed: list[bool]) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)

    @a.task(name="m.extract", tenant=TENANT, retries=0)
    def extract(n: int) -> Any:
        return list(range(n)) if n >= 0 else {"not": "a list"}

    @a.task(name="m.transform", tenant=TENANT, retries=1, retry_base=0.05, retry_cap=0.1)
    def transform(ctx: Context, extract: int) -> int:
        assert ctx.map_index == extract  # the element at this instance's index
        if extract == FLAKY and ctx.attempt == 1:
            raise RuntimeError("flaky element: fails its first attempt")
        if extract == BROKEN and not fixed:
            raise RuntimeError("broken element")
        return extract * 2

    @a.task(name="m.load", tenant=TENANT, retries=0)
    def load(transform: list[int]) -> dict[str, Any]:
        return {"n": len(transform), "sum": sum(transform), "head": transform[:3]}

    yield a
    a.close()


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "map-worker") as start:
        yield start


def put_job(app: App, n: int, **mapped: Any) -> None:
    app.jobs.put(
        f"map{n}",
        tasks={
            "extract": Task("m.extract", kwargs={"n": n}),
            "transform": Task("m.transform", map_over="extract", **mapped),
            "load": Task("m.load", depends_on=["transform"]),
        },
        tenant=TENANT,
    )


def ended(app: App, run_id: str, timeout: float = 60) -> RunRecord:
    def done() -> RunRecord | None:
        run = app.jobs.run(run_id)
        return run if run.state in ("succeeded", "failed", "cancelled") else None

    run: RunRecord = wait_for(done, f"run {run_id} to end", timeout)
    return run


def tasks_of(run: RunRecord) -> dict[str, TaskRecord]:
    return {t.task or "": t for t in run.tasks or () if isinstance(t, TaskRecord)}


def test_a_map_over_a_thousand_joined_with_a_retried_and_a_dead_element(
    app: App, start_worker: Callable[..., Worker], fixed: list[bool]
) -> None:
    put_job(app, 1000)
    start_worker(concurrency=32)
    rid = app.jobs.trigger("map1000", tenant=TENANT)
    run = ended(app, rid)
    assert run.state == "failed"
    tasks = tasks_of(run)
    assert tasks["transform"].state == "failed"
    assert tasks["load"].state == "upstream_failed"
    # the flaky element succeeded on its retry; the broken one is in the DLQ
    flaky = app.get(f"{rid}/transform[{FLAKY}]").info()
    assert (flaky.state, flaky.attempt) == ("succeeded", 2)
    broken = app.get(f"{rid}/transform[{BROKEN}]").info()
    assert broken.state == "dead"
    assert [e.task_id for e in app.broker.dlq.list(tenant=TENANT)] == [f"{rid}/transform[{BROKEN}]"]
    # the fix is deployed: replaying the dead element reopens the map and the run
    fixed.append(True)
    assert app.broker.dlq.replay([f"{rid}/transform[{BROKEN}]"]) == 1
    run = ended(app, rid)
    assert run.state == "succeeded"
    got = app.get(f"{rid}/load").result(timeout=10)
    assert got == {"n": 1000, "sum": 2 * sum(range(1000)), "head": [0, 2, 4]}
