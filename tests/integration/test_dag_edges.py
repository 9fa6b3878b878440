"""Results along a run's DAG edges (issue 32 §1), on a real worker against real
Redis: a task receives its upstream tasks' results as keyword arguments named
after them and as ``ctx.upstream`` (one read per attempt at most), a command
task in the file ``$UPSTREAM_FILE`` names, an HTTP worker in its lease's
``upstream``; a result over ``max_result_bytes`` fails the attempt that
returned it, permanently; the run page shows what each edge carried."""

from __future__ import annotations

import html
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import flask
import pytest
from flask.testing import FlaskClient
from grants import grant_commands
from web_app import bearer, complete, lease_one, login
from worker_procs import thread_workers, wait_for, worker_spawner

from redcron import App, Context, Task
from redcron.dashboard import create_app
from redcron.errors import ValidationError
from redcron.model import RunRecord, TaskRecord
from redcron.worker import Worker

TENANT = "acme"
ADMIN = "edges-admin-token"
#: the bound the tests run under (the default is 1 MiB)
BOUND = 4096


@pytest.fixture
def reads() -> list[str]:
    """The task ids whose inputs were read (``Inspection.run_inputs``), in order."""
    return []


@pytest.fixture
def app(redis_url: str, key_prefix: str, reads: list[str]) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5, max_result_bytes=BOUND)

    @a.task(name="e.one", tenant=TENANT, retries=0)
    def one() -> int:
        return 1

    @a.task(name="e.plus_one", tenant=TENANT, retries=0)
    def plus_one(a: int) -> int:
        return a + 1

    @a.task(name="e.sum", tenant=TENANT, retries=0)
    def add(a: int, b: int) -> int:
        return a + b

    @a.task(name="e.sum_ctx", tenant=TENANT, retries=0)
    def sum_ctx(ctx: Context) -> dict[str, Any]:
        return {"sum": sum(ctx.upstream.values()), "upstream": dict(ctx.upstream)}

    @a.task(name="e.both", tenant=TENANT, retries=0)
    def both(ctx: Context, a: int, b: str = "", day: str = "") -> dict[str, Any]:
        # the worker read the inputs to bind a, b and day: ctx reuses that read
        return {"a": a, "b": b, "day": day, "up": dict(ctx.upstream), "params": ctx.params}

    @a.task(name="e.plain", tenant=TENANT, retries=0)
    def plain() -> str:
        return "no inputs asked for"

    @a.task(name="e.big", tenant=TENANT, retries=3)
    def big(n: int) -> str:
        return "x" * n

    # count the inputs reads (the workers run in this process, on this broker)
    inspection = a.broker.inspection
    real = inspection.run_inputs

    def counted(shard: int, iids: Any) -> Any:
        reads.extend(iids)
        return real(shard, iids)

    inspection.run_inputs = counted  # type: ignore[method-assign]
    yield a
    a.close()


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "edges-worker") as start:
        yield start


def ended(app: App, run_id: str) -> RunRecord:
    def done() -> RunRecord | None:
        run = app.jobs.run(run_id)
        return run if run.state in ("succeeded", "failed", "cancelled") else None

    run: RunRecord = wait_for(done, f"run {run_id} to end", 30)
    return run


def tasks_of(run: RunRecord) -> dict[str, TaskRecord]:
    return {t.task or "": t for t in run.tasks or () if isinstance(t, TaskRecord)}


def result(app: App, run_id: str, name: str) -> Any:
    return app.get(f"{run_id}/{name}").result(timeout=10)


def test_the_last_task_sums_values_computed_upstream(
    app: App, start_worker: Callable[..., Worker], reads: list[str]
) -> None:
    app.jobs.put(
        "sums",
        tasks={
            "a": Task("e.one"),
            "b": Task("e.plus_one", depends_on=["a"]),
            "c": Task("e.sum", depends_on=["a", "b"]),
            "d": Task("e.sum_ctx", depends_on=["a", "b", "c"]),
            "e": Task("e.plain", depends_on=["d"]),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=4)
    rid = app.jobs.trigger("sums", tenant=TENANT)
    assert ended(app, rid).state == "succeeded"
    assert result(app, rid, "b") == 2  # a + 1, a by keyword
    assert result(app, rid, "c") == 3  # a + b
    # ctx.upstream: every upstream result by its name in the DAG, in depends_on order
    got = result(app, rid, "d")
    assert got == {"sum": 6, "upstream": {"a": 1, "b": 2, "c": 3}}
    assert list(got["upstream"]) == ["a", "b", "c"]
    # one read per attempt, and none for a task that asks for nothing (a, e)
    assert sorted(reads) == [f"{rid}/b", f"{rid}/c", f"{rid}/d"]


def test_own_args_then_upstream_results_then_params(
    app: App, start_worker: Callable[..., Worker], reads: list[str]
) -> None:
    app.jobs.put(
        "order",
        tasks={
            "a": Task("e.one"),
            "b": Task("e.plain"),
            # its own b beats b's result; a's result beats the param a; day is a param
            "c": Task("e.both", kwargs={"b": "own"}, depends_on=["a", "b"]),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=2)
    rid = app.jobs.trigger("order", tenant=TENANT, params={"a": 99, "day": "mon"})
    assert ended(app, rid).state == "succeeded"
    assert result(app, rid, "c") == {
        "a": 1,
        "b": "own",
        "day": "mon",
        "up": {"a": 1, "b": "no inputs asked for"},
        "params": {"a": 99, "day": "mon"},
    }
    assert reads.count(f"{rid}/c") == 1  # ctx.upstream and ctx.params: the same read


def test_a_job_may_leave_a_parameter_to_an_upstream_result(app: App) -> None:
    # b's required `a` is given by its upstream task a: the declaration passes
    spec = app.job("fine", tasks={"a": Task("e.one"), "b": Task("e.plus_one", depends_on=["a"])})
    app.check_task_names([spec])
    # without the edge nothing gives it: refused before anything is written
    with pytest.raises(ValidationError) as err:
        app.job("broken", tasks={"a": Task("e.one"), "b": Task("e.plus_one")})
    assert err.value.field == "tasks.b.args"
    assert "missing a required argument: 'a'" in str(err.value)


def test_a_result_over_the_bound_fails_its_attempt_for_good(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    app.jobs.put(
        "big",
        tasks={
            "fits": Task("e.big", args=[BOUND - 10]),
            "huge": Task("e.big", args=[BOUND + 10]),
            "after": Task("e.sum_ctx", depends_on=["fits", "huge"]),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=2)
    rid = app.jobs.trigger("big", tenant=TENANT)
    run = ended(app, rid)
    assert run.state == "failed"
    tasks = tasks_of(run)
    assert tasks["fits"].state == "succeeded"
    huge = tasks["huge"]
    # retries=3, yet one attempt: no retry returns anything smaller
    assert huge.state == "dead" and [a.outcome for a in huge.attempts] == ["failed"]
    assert huge.result is None  # nothing stored, not even a part of it
    assert huge.error == (
        f"result too large: {BOUND + 13:,} bytes of msgpack, over the limit of {BOUND:,} "
        "bytes (max_result_bytes (REDCRON_MAX_RESULT_BYTES)); store big data elsewhere "
        "and return a reference to it"
    )
    assert tasks["after"].state == "upstream_failed"


def test_a_command_task_reads_its_upstream_results_from_a_file(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    code = (
        "import json, os, sys\n"
        "path = os.environ['UPSTREAM_FILE']\n"
        "data = json.load(open(path))\n"
        "print('file', path)\n"
        "print('mode', oct(os.stat(path).st_mode & 0o777))\n"
        "print('sum', data['a'] + data['b'], sorted(data))\n"
    )
    root = "import os; print('root', open(os.environ['UPSTREAM_FILE']).read())"
    grant_commands(app, TENANT)
    app.jobs.put(
        "shell",
        tasks={
            "first": Task(command=[sys.executable, "-c", root]),
            "a": Task("e.one", depends_on=["first"]),
            "b": Task("e.plus_one", depends_on=["a"]),
            "sh": Task(command=[sys.executable, "-c", code], depends_on=["a", "b"]),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=2, allow_commands=True, queues=["default", "commands"])
    rid = app.jobs.trigger("shell", tenant=TENANT)
    assert ended(app, rid).state == "succeeded"
    lines = app.broker.inspection.log_lines(f"{rid}/sh", 1)
    assert "sum 3 ['a', 'b']" in lines, lines
    assert "mode 0o600" in lines, lines
    path = next(line.split(" ", 1)[1] for line in lines if line.startswith("file "))
    assert not os.path.exists(path)  # removed once the command ended
    # a task that depends on none: {} (the command from the command's upstream: ok)
    assert app.broker.inspection.log_lines(f"{rid}/first", 1) == ["root {}"]
    # the command's own result is what its downstream would read
    assert result(app, rid, "first") == {"exit_code": 0}


def test_a_one_off_command_gets_no_upstream_file(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    grant_commands(app, TENANT)
    code = "import os; print('has', 'UPSTREAM_FILE' in os.environ)"
    handle = app.enqueue_command([sys.executable, "-c", code], tenant=TENANT)
    start_worker(concurrency=1, allow_commands=True, queues=["commands"])
    handle.result(timeout=20)
    assert app.broker.inspection.log_lines(handle.id, 1) == ["has False"]


def test_a_process_pool_child_binds_upstream_results_and_keeps_the_bound(
    app: App, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    # chaos_app's echo(value) returns value: a node named "value" feeds the next
    app.jobs.put(
        "child",
        tasks={
            "value": Task("echo", args=[41]),
            "out": Task("echo", depends_on=["value"]),
            "big": Task("echo", args=["z" * 200]),
        },
        tenant=TENANT,
        allow_unregistered=True,
    )
    rid = app.jobs.trigger("child", tenant=TENANT)
    bound = {"REDCRON_MAX_RESULT_BYTES": "100"}  # the child reads its settings from the env
    with worker_spawner(redis_url, key_prefix, tmp_path, bound, lease_ttl=2.0) as spawn:
        spawn(concurrency=1, pool="processes", app_path="chaos_app:app", tenants=[TENANT])
        run = ended(app, rid)
    tasks = tasks_of(run)
    assert tasks["out"].decoded_result() == 41
    assert tasks["big"].state == "dead" and len(tasks["big"].attempts) == 1  # retries=3: unused
    assert (tasks["big"].error or "").startswith("result too large: 202 bytes of msgpack")


# -- HTTP workers -------------------------------------------------------------------


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


@pytest.fixture
def client(web: flask.Flask) -> FlaskClient:
    return bearer(web, ADMIN)


def test_an_http_workers_lease_carries_the_upstream_results(app: App, client: FlaskClient) -> None:
    app.jobs.put(
        "http",
        tasks={
            "a": Task("e.one"),
            "b": Task("e.plus_one", depends_on=["a"]),
            "c": Task("e.sum", depends_on=["a", "b"]),
        },
        tenant=TENANT,
    )
    rid = app.jobs.trigger("http", tenant=TENANT)
    a = lease_one(client)
    assert a["task_id"] == f"{rid}/a" and a["upstream"] == {}
    assert complete(client, a, 1).status_code == 200
    b = lease_one(client)
    assert b["task_id"] == f"{rid}/b" and b["upstream"] == {"a": 1}
    assert complete(client, b, {"x": [1, 2], "s": "é"}).status_code == 200
    c = lease_one(client)
    assert c["upstream"] == {"a": 1, "b": {"x": [1, 2], "s": "é"}}
    # a one-off task is of no run: no upstream at all
    app.enqueue("e.one")
    assert "upstream" not in lease_one(client)


def test_an_http_result_over_the_bound_fails_the_attempt(app: App, client: FlaskClient) -> None:
    handle = app.enqueue("e.big", 1)
    item = lease_one(client)
    resp = complete(client, item, "y" * BOUND)
    assert resp.status_code == 413, resp.get_data(as_text=True)
    err = resp.get_json()["error"]
    assert err["code"] == "result_too_large" and err["field"] == "result"
    assert "max_result_bytes" in err["message"] and "not retried" in err["message"]
    info = handle.info()
    assert info.state == "dead" and info.result is None  # retries=3: none used
    assert [a.outcome for a in info.attempts] == ["failed"]
    assert info.error is not None and info.error.startswith("result too large:")


# -- the run page ---------------------------------------------------------------------


def test_the_run_page_shows_what_each_edge_carried(
    app: App, web: flask.Flask, start_worker: Callable[..., Worker]
) -> None:
    app.jobs.put(
        "page",
        tasks={
            "a": Task("e.one"),
            "b": Task("e.plus_one", depends_on=["a"]),
            "c": Task("e.sum_ctx", depends_on=["a", "b"]),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=2)
    rid = app.jobs.trigger("page", tenant=TENANT)
    assert ended(app, rid).state == "succeeded"
    page = login(web, ADMIN).get(f"/runs/{rid}").get_data(as_text=True)
    # each edge says what its upstream handed on (hover text and a data attribute)
    assert 'data-from="a" data-to="b"' in page
    assert "<title>a \u2192 b: 1</title>" in page
    assert "<title>b \u2192 c: 2</title>" in page
    assert 'data-from="a" data-to="c"' in page and "<title>a \u2192 c: 1</title>" in page
    # and each task's row its result
    assert "<th>result</th>" in page
    shown = html.unescape(page)
    assert '<td class="result"><code>{"sum": 3, "upstream": {"a": 1, "b": 2}}</code></td>' in shown
    assert json.dumps({"sum": 3, "upstream": {"a": 1, "b": 2}}) in shown
