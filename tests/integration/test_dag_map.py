"""Fan-out at run time (issue 32 §2), on real workers against real Redis: a
task mapped over a list its upstream returns makes one instance per element
(``transform[0]``, ``transform[1]``...), made page by page by maintenance from
the follow-up the upstream's success wrote; a task downstream of it joins
them (receives their results, in order).  Retries, the DLQ, cancel and run
retry apply to each instance."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import flask
import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient
from followups import follow
from grants import grant_commands
from web_app import bearer, complete, lease_one, login
from worker_procs import thread_workers, wait_for

from redcron import App, Context, Task
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.errors import NotFound
from redcron.model import RunRecord, TaskRecord
from redcron.store.tokens import TokenStore
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


def exists(app: App, task_id: str) -> bool:
    try:
        app.get(task_id).info()
    except NotFound:
        return False
    return True


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


def test_the_instances_keep_the_runs_retention(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    put_job(app, 5)
    start_worker(concurrency=4)
    rid = app.jobs.trigger("map5", tenant=TENANT)
    assert ended(app, rid).state == "succeeded"
    core = app.broker
    shard = app.get(f"{rid}/transform").info().shard

    def retained() -> bool:  # retention is a follow-up of the run's end
        keys = [core.keys.ti(shard, f"{rid}/transform[{i}]") for i in range(5)]
        return all(core.client.ttl(k) > 0 for k in keys)

    wait_for(retained, "the mapped instances to get the run's retention", 10)


def test_an_empty_list_joins_at_once(app: App, start_worker: Callable[..., Worker]) -> None:
    put_job(app, 0)
    start_worker(concurrency=2)
    rid = app.jobs.trigger("map0", tenant=TENANT)
    run = ended(app, rid)
    assert run.state == "succeeded"
    mapped = tasks_of(run)["transform"].mapped
    assert mapped is not None and (mapped.count, mapped.made) == (0, 0)
    assert app.get(f"{rid}/load").result(timeout=10) == {"n": 0, "sum": 0, "head": []}


def test_a_result_that_is_not_a_list_fails_the_mapped_task(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    app.jobs.put(
        "notalist",
        tasks={
            "extract": Task("m.extract", kwargs={"n": -1}),
            "transform": Task("m.transform", map_over="extract"),
            "load": Task("m.load", depends_on=["transform"]),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=2)
    run = ended(app, app.jobs.trigger("notalist", tenant=TENANT))
    tasks = tasks_of(run)
    assert (run.state, tasks["transform"].state) == ("failed", "failed")
    assert "gave dict, not a list" in (tasks["transform"].error or "")
    assert tasks["load"].state == "upstream_failed"


def test_a_list_over_map_max_fails_the_mapped_task_naming_the_bound(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    put_job(app, 12, map_max=10)
    start_worker(concurrency=2)
    run = ended(app, app.jobs.trigger("map12", tenant=TENANT))
    error = tasks_of(run)["transform"].error or ""
    assert "12 elements, over the task's map_max of 10" in error
    assert not exists(app, f"{run.id}/transform[0]")  # nothing was made


def test_cancelling_the_run_cancels_every_instance(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    put_job(app, 300, queue="later")
    rid = app.jobs.trigger("map300", tenant=TENANT)
    # no worker serves the mapped task's queue: extract runs, then the map is made
    start_worker(concurrency=1, queues=["default"])
    wait_for(lambda: exists(app, f"{rid}/transform[299]"), "the map to be made", 20)
    app.jobs.cancel_run(rid)
    run = app.jobs.run(rid)
    assert run.state == "cancelled"
    states = {app.get(f"{rid}/transform[{i}]").info().state for i in range(300)}
    assert states == {"cancelled"}
    assert tasks_of(run)["load"].state == "cancelled"
    assert all(load.ready == 0 for load in app.broker.inspection.inspect())


def test_a_run_retry_retries_the_dead_instances(
    app: App, start_worker: Callable[..., Worker], fixed: list[bool]
) -> None:
    put_job(app, 600)
    start_worker(concurrency=16)
    rid = app.jobs.trigger("map600", tenant=TENANT)
    assert ended(app, rid).state == "failed"
    fixed.append(True)
    assert app.jobs.retry_run(rid) == 1  # the one dead instance
    assert ended(app, rid).state == "succeeded"
    assert app.get(f"{rid}/load").result(timeout=10)["n"] == 600


def test_a_chord_maps_over_its_items_and_joins_them(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    @app.task(name="m.square", tenant=TENANT)
    def square(x: int, plus: int = 0) -> int:
        return x * x + plus

    @app.task(name="m.total", tenant=TENANT)
    def total(squares: list[int]) -> int:
        return sum(squares)

    start_worker(concurrency=8)
    handle = app.chord(square.map(range(100), plus=1), total)
    assert handle.result(timeout=30) == sum(x * x + 1 for x in range(100))
    # a second chord reuses the job; an empty one joins at once
    assert app.chord(square.map([]), total).result(timeout=30) == 0


# -- HTTP workers and command tasks ---------------------------------------------------

ADMIN = "map-admin-token"


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


@pytest.fixture
def client(web: flask.Flask) -> FlaskClient:
    return bearer(web, ADMIN)


def test_an_http_worker_gets_its_element_and_the_join_the_list(
    app: App, web: flask.Flask, client: FlaskClient
) -> None:
    put_job(app, 3)
    rid = app.jobs.trigger("map3", tenant=TENANT)
    assert complete(client, lease_one(client), ["a", "b", "c"]).status_code == 200
    follow(app)  # maintenance makes the map (no worker here does)
    for _ in range(3):
        item = lease_one(client)
        index = int(item["task_id"].rsplit("[", 1)[1][:-1])
        assert item["upstream"] == {"extract": "abc"[index]}
        assert complete(client, item, "abc"[index].upper()).status_code == 200
    join = lease_one(client)
    assert join["task_id"] == f"{rid}/load" and join["upstream"] == {"transform": ["A", "B", "C"]}
    # the run's page: one node for the mapped task, with its counts
    page = login(web, ADMIN).get(f"/runs/{rid}").get_data(as_text=True)
    assert "succeeded · 3/3" in page and "3 instances over extract: 3 succeeded" in page


def test_a_mapped_command_task_reads_its_element_from_the_upstream_file(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    code = "import json, os; print('got', json.load(open(os.environ['UPSTREAM_FILE'])))"
    grant_commands(app, TENANT)
    app.jobs.put(
        "shell",
        tasks={
            "extract": Task("m.extract", kwargs={"n": 2}),
            "sh": Task(command=[sys.executable, "-c", code], map_over="extract"),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=2, allow_commands=True, queues=["default", "commands"])
    rid = app.jobs.trigger("shell", tenant=TENANT)
    assert ended(app, rid).state == "succeeded"
    for i in range(2):
        assert app.broker.inspection.log_lines(f"{rid}/sh[{i}]", 1) == [f"got {{'extract': {i}}}"]


def test_the_instances_share_their_tasks_concurrency_cap(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    running, peak = [0], [0]
    lock = threading.Lock()

    @app.task(name="m.capped", tenant=TENANT, concurrency_key="group", max_concurrent=2, retries=0)
    def capped(extract: int, group: str = "all") -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return extract

    app.jobs.put(
        "capped",
        tasks={
            "extract": Task("m.extract", kwargs={"n": 12}),
            "transform": Task("m.capped", map_over="extract"),
            "load": Task("m.load", depends_on=["transform"]),
        },
        tenant=TENANT,
    )
    start_worker(concurrency=8)
    rid = app.jobs.trigger("capped", tenant=TENANT)
    assert ended(app, rid).state == "succeeded"
    assert peak[0] <= 2
    assert app.get(f"{rid}/transform[5]").info().max_concurrent == 2


# -- the REST API and the CLI ---------------------------------------------------------


def test_a_mapped_job_through_the_rest_api(app: App, web: flask.Flask, client: FlaskClient) -> None:
    body = {
        "name": "api-map",
        "tenant": TENANT,
        "tasks": {
            "extract": {"task": "m.extract", "kwargs": {"n": 2}},
            "transform": {"task": "m.transform", "map_over": "extract", "map_max": 5},
            "load": {"task": "m.load", "depends_on": ["transform"]},
        },
    }
    bad = client.post("/v1/jobs", json={**body, "tasks": {**body["tasks"], "transform": {
        "task": "m.transform", "map_over": "nope"}}})  # fmt: skip
    assert bad.status_code == 400
    assert bad.get_json()["error"]["field"] == "tasks.transform.map_over"
    created = client.post("/v1/jobs", json=body)
    assert created.status_code == 201, created.get_data(as_text=True)
    task = created.get_json()["spec"]["tasks"]["transform"]
    assert (task["map_over"], task["map_max"]) == ("extract", 5)
    rid = client.post(f"/v1/jobs/{created.get_json()['id']}/trigger").get_json()["run_id"]
    assert complete(client, lease_one(client), [1, 2]).status_code == 200
    follow(app)
    run = client.get(f"/v1/runs/{rid}").get_json()
    mapped = {t["name"]: t["mapped"] for t in run["tasks"]}["transform"]
    assert mapped == {"over": "extract", "count": 2, "made": 2, "ended": 0, "succeeded": 0}
    one = client.get(f"/v1/tasks/{rid}/transform[1]").get_json()
    assert (one["map_index"], one["item"], one["state"]) == (1, 2, "ready")
    # another tenant's token sees neither the run nor an instance, and a worker
    # token of another tenant leases none of them
    tokens = TokenStore(app.broker)
    theirs = bearer(web, tokens.create_tenant("other")[1])
    assert theirs.get(f"/v1/runs/{rid}").status_code == 404
    assert theirs.get(f"/v1/tasks/{rid}/transform[1]").status_code == 404
    _info, worker_token = tokens.create_worker(["default"], ["other"])
    leased = bearer(web, worker_token).post("/v1/worker/lease", json={"worker_id": "hw-x"})
    assert leased.status_code == 200 and leased.get_json() == []


def test_the_cli_shows_a_mapped_tasks_counts_and_an_instance(
    app: App,
    start_worker: Callable[..., Worker],
    redis_url: str,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    put_job(app, 3)
    start_worker(concurrency=2)
    rid = app.jobs.trigger("map3", tenant=TENANT)
    assert ended(app, rid).state == "succeeded"
    monkeypatch.setenv("REDCRON_PREFIX", key_prefix.rstrip(":"))
    shown = CliRunner().invoke(main, ["runs", "show", rid, "--redis", redis_url])
    assert shown.exit_code == 0, shown.output
    assert "3 instances over extract: 3 succeeded" in shown.output
    watched = CliRunner().invoke(main, ["runs", "watch", rid, "--redis", redis_url])
    assert watched.exit_code == 0, watched.output
    assert "transform=succeeded(3/3)" in watched.output
    one = CliRunner().invoke(main, ["task", "show", f"{rid}/transform[2]", "--redis", redis_url])
    assert one.exit_code == 0, one.output
    assert "map index   2" in one.output and "result      4" in one.output
    assert "element     2" in one.output
