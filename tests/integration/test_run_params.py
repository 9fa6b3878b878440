"""Per-call arguments for a run (issue 32 §3): ``params`` given through the
Python API, ``redcron jobs trigger --param`` and ``POST /v1/jobs/{id}/trigger``
reach a DAG task as keyword arguments its function declares, after its own
args, on a real worker against real Redis."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cli_fixtures import Invoke, invoke_fixture, prefix_fixture  # noqa: F401 (fixtures)
from worker_procs import thread_workers, wait_for

from redcron import App, Context, Task
from redcron.dashboard import create_app
from redcron.model import RunRecord
from redcron.worker import Worker

ADMIN = "params-admin-token"


@pytest.fixture
def app(redis_url: str, prefix: str) -> Iterator[App]:
    """``p.report`` (every parameter defaulted, as a job's scheduled runs have no
    params) and ``p.needs`` (``day`` required), and the job ``daily``: ``a`` gives
    ``label``, ``b`` gives ``day`` by position."""
    a = App(redis_url, prefix=prefix)

    @a.task(name="p.report", retries=0)
    def report(
        ctx: Context, day: str | None = None, n: int = 1, *, label: str = "default"
    ) -> dict[str, Any]:
        return {"day": day, "n": n, "label": label, "ctx": ctx.params}

    @a.task(name="p.needs", retries=0)
    def needs(day: str) -> str:
        return day

    a.jobs.put(
        "daily",
        tasks={
            "a": Task("p.report", kwargs={"label": "from the job"}),
            "b": Task("p.report", args=["by position"], depends_on=["a"]),
        },
    )
    # written without the registration's check (app.job would refuse it: a run
    # without params could never call needs())
    a.jobs.put("strict", tasks={"s": Task("p.needs")})
    yield a
    a.close()


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "params-worker") as start:
        yield start


def _ended(app: App, run_id: str) -> RunRecord:
    wait_for(lambda: app.jobs.run(run_id).state in ("succeeded", "failed"), "the run to end")
    return app.jobs.run(run_id)


def _results(app: App, run_id: str) -> dict[str, Any]:
    run = _ended(app, run_id)
    assert run.state == "succeeded", run
    return {name: app.get(f"{run_id}/{name}").result(timeout=5) for name in ("a", "b")}


def test_python_params_fill_what_the_tasks_args_leave_unset(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    start_worker(concurrency=2)
    params = {"day": "mon", "n": 3, "label": "from the trigger", "unused": True}
    got = _results(app, app.jobs.trigger("daily", params=params))
    # a: its own label wins; day and n come from the params
    assert got["a"] == {"day": "mon", "n": 3, "label": "from the job", "ctx": params}
    # b: its own day (by position) wins; n and label come from the params
    assert got["b"] == {"day": "by position", "n": 3, "label": "from the trigger", "ctx": params}
    # no params (a scheduled run, or a trigger without): the function's defaults
    got = _results(app, app.jobs.trigger("daily"))
    assert got["a"] == {"day": None, "n": 1, "label": "from the job", "ctx": {}}


def test_a_required_parameter_only_a_param_can_give(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    start_worker(concurrency=2)
    given = app.jobs.trigger("strict", params={"day": "tue"})
    missing = app.jobs.trigger("strict")
    assert app.get(f"{given}/s").result(timeout=30) == "tue"
    assert _ended(app, missing).state == "failed"
    info = app.get(f"{missing}/s").info()
    assert info.state == "dead" and len(info.attempts) == 1  # never retried
    assert info.error == "needs() missing a required argument: 'day'"


def test_cli_params_are_json_when_they_parse_else_text(
    app: App, invoke: Invoke, start_worker: Callable[..., Worker]
) -> None:
    start_worker(concurrency=2)
    out = invoke(
        "jobs", "trigger", "daily", "--json",
        "--param", "day=2026-11-29", "--param", "n=3", "--param", 'label="42"',
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    # 2026-11-29 is no JSON: text; 3 is; "42" is the JSON text 42
    assert shown["params"] == {"day": "2026-11-29", "n": 3, "label": "42"}
    got = _results(app, shown["run_id"])
    assert got["a"]["day"] == "2026-11-29" and got["a"]["n"] == 3
    assert got["b"]["label"] == "42"


def test_the_api_trigger_body_params(app: App, start_worker: Callable[..., Worker]) -> None:
    client = create_app(app, admin_token=ADMIN).test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    job_id = app.jobs.get("daily").id
    resp = client.post(f"/v1/jobs/{job_id}/trigger", json={"params": {"day": "wed", "n": 7}})
    assert resp.status_code == 201, resp.get_data(as_text=True)
    run_id = resp.get_json()["run_id"]
    start_worker(concurrency=2)
    got = _results(app, run_id)
    assert (got["a"]["day"], got["a"]["n"], got["b"]["n"]) == ("wed", 7, 7)
    assert client.get(f"/v1/runs/{run_id}").get_json()["params"] == {"day": "wed", "n": 7}
