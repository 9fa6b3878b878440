"""Runs of a DAG executed by a real worker (in a thread of the test process).

Tasks record what they saw (``ctx.idem_key``, attempt, order of execution)
under the test's key prefix, so the tests check from outside that a run's
tasks ran in dependency order, with an idempotency key that is the same
across attempts, and that ``app.jobs.run`` tells the whole story.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from grants import grant_commands
from worker_procs import (  # tests/helpers is put on sys.path by tests/conftest.py
    thread_workers,
    wait_for,
)

from redcron import App, Context, Permanent
from redcron.model import RunRecord, TaskRecord
from redcron.model.jobs import Task
from redcron.worker import Worker

TENANT = "acme"
RUN_ENDED = ("succeeded", "failed", "cancelled")


def rec_key(app: App, name: str) -> str:
    return f"{app.settings.prefix}:x:{name}"


def register(app: App) -> None:
    def record(ctx: Context, label: str) -> None:
        assert ctx.broker is not None
        entry = {
            "label": label,
            "idem": ctx.idem_key,
            "id": ctx.task_id,
            "attempt": ctx.attempt,
            "tenant": ctx.tenant,
        }
        ctx.broker.client.rpush(rec_key(app, "seen"), json.dumps(entry))

    @app.task(name="dag.step", retries=0)
    def step(ctx: Context, label: str) -> str:
        record(ctx, label)
        return label.upper()

    @app.task(name="dag.flaky", retries=0)
    def flaky(ctx: Context, label: str) -> str:
        record(ctx, label)
        if ctx.attempt == 1:
            raise RuntimeError(f"{label}: attempt 1 fails")
        return label.upper()

    @app.task(name="dag.params", retries=0)
    def params(ctx: Context) -> dict[str, Any]:
        return ctx.params

    @app.task(name="dag.broken", retries=0)
    def broken(ctx: Context, label: str) -> None:
        record(ctx, label)
        raise Permanent(f"{label} cannot work")


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)
    register(a)
    yield a
    a.close()


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    """In-process workers (threads pool), stopped and joined afterwards."""
    with thread_workers(app, "dag-worker") as start:
        yield start


def seen(app: App) -> list[dict[str, Any]]:
    return [json.loads(x) for x in app.broker.client.lrange(rec_key(app, "seen"), 0, -1)]


def wait_run(app: App, run_id: str, timeout: float = 20.0) -> RunRecord:
    def ended() -> RunRecord | None:
        info = app.jobs.run(run_id)
        return info if info.state in RUN_ENDED else None

    info: RunRecord = wait_for(ended, f"run {run_id} to end", timeout)
    return info


def by_task(info: RunRecord) -> dict[str, TaskRecord]:
    tasks = info.tasks or ()
    assert all(isinstance(t, TaskRecord) for t in tasks), tasks  # none expired
    return {t.task or "": t for t in tasks if isinstance(t, TaskRecord)}


def after(later: datetime | None, earlier: datetime | None) -> bool:
    """Both times are set, and ``later`` is not before ``earlier``."""
    return later is not None and earlier is not None and later >= earlier


def step(label: str, *deps: str, ref: str = "dag.step", **options: Any) -> Task:
    return Task(ref, args=[label], depends_on=list(deps), **options)


def test_three_task_dag_runs_in_order_with_stable_idem_keys(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    app.jobs.put(
        "etl",
        tasks={
            "extract": step("extract"),
            "transform": step("transform", "extract"),
            "load": step("load", "transform"),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=4)
    rid = app.jobs.trigger("etl", tenant=TENANT)
    info = wait_run(app, rid)
    assert info.state == "succeeded"
    assert (info.total, info.done, info.succeeded) == (3, 3, 3)

    records = seen(app)
    assert [r["label"] for r in records] == ["extract", "transform", "load"]
    for r in records:
        # a run's task: instance id <run_id>/<task>, idempotency key <run_id>:<task>
        assert r["id"] == f"{rid}/{r['label']}"
        assert r["idem"] == f"{rid}:{r['label']}"
        assert r["attempt"] == 1
        assert r["tenant"] == TENANT

    tasks = by_task(info)
    assert list(tasks) == ["extract", "transform", "load"]  # DAG order
    for inst in tasks.values():
        assert inst.state == "succeeded"
        assert [a.outcome for a in inst.attempts] == ["succeeded"]
        assert inst.run_id == rid
    # each task started only after its upstream ended (server clock)
    assert after(tasks["transform"].attempts[0].leased_at, tasks["extract"].ended_at)
    assert after(tasks["load"].attempts[0].leased_at, tasks["transform"].ended_at)
    assert [r.id for r in app.jobs.runs(info.job_id)] == [rid]


def test_task_that_fails_once_is_retried_inside_the_run(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    app.jobs.put(
        "retrying",
        tasks={
            "first": step("first"),
            "flaky": step(
                "flaky", "first", ref="dag.flaky", retries=2, retry_base=0.01, retry_cap=0.05
            ),
            "after": step("after", "flaky"),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=2)
    rid = app.jobs.trigger("retrying", tenant=TENANT)
    info = wait_run(app, rid)
    assert info.state == "succeeded"

    flaky = by_task(info)["flaky"]
    assert flaky.state == "succeeded"
    assert [a.outcome for a in flaky.attempts] == ["failed", "succeeded"]
    assert "attempt 1 fails" in str(flaky.attempts[0].error)
    assert flaky.attempt == 2

    records = seen(app)
    assert [(r["label"], r["attempt"]) for r in records] == [
        ("first", 1),
        ("flaky", 1),
        ("flaky", 2),
        ("after", 1),
    ]
    # the same key on both attempts: effects deduplicate across retries
    assert {(r["id"], r["idem"]) for r in records if r["label"] == "flaky"} == {
        (f"{rid}/flaky", f"{rid}:flaky")
    }


def test_dead_task_fails_its_downstream_and_the_independent_branch_completes(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    app.jobs.put(
        "mixed",
        tasks={
            "root": step("root"),
            "bad": step("bad", "root", ref="dag.broken", retries=3),
            "after_bad": step("after_bad", "bad"),
            "good": step("good", "root"),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=4)
    rid = app.jobs.trigger("mixed", tenant=TENANT)
    info = wait_run(app, rid)
    assert info.state == "failed"
    states = {t: i.state for t, i in by_task(info).items()}
    assert states == {
        "root": "succeeded",
        "bad": "dead",
        "after_bad": "upstream_failed",
        "good": "succeeded",
    }
    assert [a.outcome for a in by_task(info)["bad"].attempts] == ["failed"]  # Permanent
    assert by_task(info)["after_bad"].attempts == ()
    assert "after_bad" not in [r["label"] for r in seen(app)]


def test_command_task_inside_a_dag(app: App, start_worker: Callable[..., Worker]) -> None:
    code = "import sys; print('shell step ran'); sys.exit(0)"
    grant_commands(app, TENANT)
    app.jobs.put(
        "with_cmd",
        tasks={
            "prep": step("prep"),
            "shell": Task(command=[sys.executable, "-c", code], depends_on=["prep"]),
            "post": step("post", "shell"),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=2, allow_commands=True, queues=["default", "commands"])
    rid = app.jobs.trigger("with_cmd", tenant=TENANT)
    info = wait_run(app, rid)
    assert info.state == "succeeded"
    tasks = by_task(info)
    shell = tasks["shell"]
    assert shell.kind == "command"
    assert shell.queue == "commands"
    assert shell.state == "succeeded"
    assert [a.outcome for a in shell.attempts] == ["succeeded"]
    assert "shell step ran" in app.broker.inspection.log_lines(shell.id, 1)
    assert [r["label"] for r in seen(app)] == ["prep", "post"]
    assert after(tasks["post"].attempts[0].leased_at, shell.ended_at)


def test_manual_run_params_reach_tasks(app: App, start_worker: Callable[..., Worker]) -> None:
    app.jobs.put("report", tasks={"p": Task("dag.params")}, tenant=TENANT)
    start_worker(concurrency=1)
    rid = app.jobs.trigger("report", tenant=TENANT, params={"day": "2026-11-29", "n": 3})
    assert wait_run(app, rid).state == "succeeded"
    assert app.get(f"{rid}/p").result(timeout=5) == {"day": "2026-11-29", "n": 3}
