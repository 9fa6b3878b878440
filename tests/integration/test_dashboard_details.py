"""The dashboard details of issue 20 §6, through Flask's test client on the real
Redis fixture with in-process workers: tracebacks preformatted, the overview
chart's legend, runs shown by their time in the job's zone, attempts readable
after a manual retry, tenant form errors next to their field, no Cancel on an
ended task, and one retry rule for a task run by a job and one enqueued."""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from beats import tick_until  # tests/helpers is on sys.path
from cli_fixtures import Invoke, invoke_fixture, prefix_fixture  # noqa: F401 (fixtures)
from flask.testing import FlaskClient
from web_app import add_and_broken_app
from worker_procs import thread_workers, wait_for

from redcron import App
from redcron.beat.beat import Beat
from redcron.dashboard import create_app
from redcron.model.jobs import Task, job_spec
from redcron.worker import Worker

MINE = "acme"
ADMIN = "details-admin-token"
ZONE = "Europe/Berlin"


@pytest.fixture
def app(redis_url: str, key_prefix: str, prefix: str) -> Iterator[App]:
    """``ui.add``, ``ui.broken`` and two that raise (a traceback each):
    ``ui.raises`` (no retries) and ``ui.twice`` (``retries=2``, quick backoff)."""
    with add_and_broken_app(redis_url, key_prefix, "ui", MINE) as a:

        @a.task(name="ui.raises", tenant=MINE, retries=0)
        def raises() -> None:
            raise ValueError("bad row 7")

        @a.task(name="ui.twice", tenant=MINE, retries=2, retry_base=0.01, retry_cap=0.02)
        def twice() -> None:
            raise RuntimeError("still broken")

        yield a


@pytest.fixture
def admin(app: App) -> FlaskClient:
    client = create_app(app, admin_token=ADMIN).test_client()
    assert client.get("/login").status_code == 200
    assert post(client, "/login", token=ADMIN).status_code == 303
    return client


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "details-worker") as start:
        yield start


def post(client: FlaskClient, path: str, **data: Any) -> Any:
    with client.session_transaction() as session:
        csrf = session["csrf_token"]
    return client.post(path, data={"csrf_token": csrf, **data})


def text(resp: Any) -> str:
    assert resp.status_code == 200, resp.status_code
    body: str = resp.get_data(as_text=True)
    return body


def one_task_job(app: App, ref: str, name: str = "one", *args: Any) -> str:
    spec = job_spec(name, tenant=MINE, tz=ZONE, tasks={"t": Task(ref=ref, args=list(args))})
    return app.jobs.put(spec).id


def test_a_python_traceback_is_shown_preformatted(
    app: App, admin: FlaskClient, start_worker: Callable[..., Worker]
) -> None:
    handle = app.tasks["ui.raises"].enqueue()
    start_worker()
    wait_for(lambda: handle.state == "dead", "the task to fail")
    page = html.unescape(text(admin.get(f"/tasks/{handle.id}")))
    block = re.search(r'<pre class="traceback">(Traceback.*?)</pre>', page, re.S)
    assert block is not None, page
    assert 'raise ValueError("bad row 7")' in block.group(1)
    assert block.group(1).rstrip().endswith("ValueError: bad row 7")
    assert "\n  File " in block.group(1)  # its lines and indentation kept
    # the attempts table folds it behind its last line; lists show that line only
    assert '<summary class="error">ValueError: bad row 7</summary>' in page
    listed = html.unescape(text(admin.get(f"/tasks?tenant={MINE}&name=ui.raises")))
    assert '<td class="error">ValueError: bad row 7</td>' in listed
    dlq = html.unescape(text(admin.get(f"/dlq?tenant={MINE}")))
    assert "failed: ValueError: bad row 7" in dlq and '<pre class="traceback">Traceback' in dlq


def test_the_overview_chart_has_a_legend(app: App, admin: FlaskClient) -> None:
    page = text(admin.get("/"))
    chart = re.search(r'<div class="chart-wrap" id="activity">(.*?)</div>', page, re.S)
    assert chart is not None
    assert '<g class="legend">' in chart.group(1)
    assert ">succeeded (0)</text>" in chart.group(1) and ">failed (0)</text>" in chart.group(1)


def test_runs_show_their_fire_time_in_the_jobs_zone(app: App, admin: FlaskClient) -> None:
    app.jobs.put(
        job_spec("tick", tenant=MINE, every="1s", tz=ZONE, tasks={"t": Task(ref="ui.add")})
    )
    job_id = app.jobs.job_id("tick", tenant=MINE)
    beat = Beat(app, name="details-beat")
    [run] = tick_until(beat, lambda: app.jobs.runs(job_id, 1), "a fire")
    assert run.scheduled_for is not None
    local = run.scheduled_for.astimezone(ZoneInfo(ZONE)).strftime("%Y-%m-%d %H:%M:%S %Z")
    assert local.endswith((" CET", " CEST"))
    fire_ms = run.id.split("@")[-1]
    page = text(admin.get(f"/jobs/{job_id}"))
    row = re.search(rf'<tr data-run-id="{re.escape(run.id)}">(.*?)</tr>', page, re.S)
    assert row is not None
    link = re.search(r'<a href="/runs/[^"]+" title="run ([^"]+)">([^<]+)</a>', row.group(1))
    assert link is not None and link.groups() == (run.id, local)
    assert f">{fire_ms}<" not in page  # not the raw epoch milliseconds
    assert f"<th>run (in {ZONE})</th>" in page
    assert f"<title>{local}: " in page  # the duration chart's bars say it too
    run_page = text(admin.get(f"/runs/{run.id}"))
    assert f'<span id="run-time">for {local}</span>' in run_page
    assert f"<title>Run {run.id} of {MINE}/tick · redcron</title>" in run_page  # id kept


def test_attempts_after_a_manual_retry_read_against_the_fresh_budget(
    app: App, admin: FlaskClient, start_worker: Callable[..., Worker], invoke: Invoke
) -> None:
    one_task_job(app, "ui.raises")
    run_id = app.jobs.trigger("one", tenant=MINE)
    tid = f"{run_id}/t"
    start_worker()
    wait_for(lambda: app.broker.inspection.task_info(tid).state == "dead", "the first attempt")
    assert post(admin, f"/runs/{run_id}/tasks/t/retry").status_code == 303
    wait_for(lambda: app.broker.inspection.task_info(tid).attempt == 2, "the retry to run")
    wait_for(lambda: app.broker.inspection.task_info(tid).state == "dead", "the retry to fail")
    run_page = text(admin.get(f"/runs/{run_id}?task=t"))
    assert '<td class="num">1 / 1 (+1 earlier)</td>' in run_page
    assert "2 / 1" not in run_page and "2 of 1" not in run_page
    detail = "1 of 1, +1 earlier (before a retry, a DLQ replay or a hand-back: 2 in all)"
    assert f'<dd class="attempts-budget">{detail}</dd>' in run_page
    assert detail in text(admin.get(f"/tasks/{tid}"))
    assert "1 / 1 (+1 earlier)" in text(admin.get(f"/tasks?tenant={MINE}&name=ui.raises"))
    # the CLI says it the same way
    shown = invoke("task", "show", tid)
    assert shown.exit_code == 0, shown.output
    assert detail in shown.output


def test_a_bad_value_in_the_tenant_form_is_shown_next_to_its_field(
    app: App, admin: FlaskClient
) -> None:
    app.tenants.set(MINE, weight=3)
    resp = post(admin, f"/tenants/{MINE}", weight="heavy", max_in_flight="lots", rate="10/s")
    assert resp.status_code == 400
    page = resp.get_data(as_text=True)
    assert 'id="tenant-settings"' in page and "Error 400" not in page  # the form, not an error page
    for field, said in (("weight", "is not a number"), ("max_in_flight", "is not a whole number")):
        tag = re.search(rf'<input id="s-{field}"[^>]*>', page)
        assert tag is not None and 'aria-invalid="true"' in tag.group(0)
        assert f'aria-describedby="e-{field}"' in tag.group(0)
        message = re.search(
            rf'<div class="field-error" id="e-{field}" role="alert">([^<]*)</div>', page
        )
        assert message is not None and said in html.unescape(message.group(1))
    assert 'value="heavy"' in page and 'value="lots"' in page and 'value="10/s"' in page  # kept
    assert app.tenants.get(MINE).weight == 3  # nothing saved
    # a value the settings refuse (out of range): next to its field too
    resp = post(admin, f"/tenants/{MINE}", weight="0")
    assert resp.status_code == 400
    assert re.search(
        r'<div class="field-error" id="e-weight" role="alert">[^<]*>= 1',
        html.unescape(resp.get_data(as_text=True)),
    )


def test_an_ended_task_has_no_cancel_button(
    app: App, admin: FlaskClient, start_worker: Callable[..., Worker]
) -> None:
    one_task_job(app, "ui.add", "one", 1)
    run_id = app.jobs.trigger("one", tenant=MINE)
    queued = app.tasks["ui.add"].enqueue(1)
    before = text(admin.get(f"/tasks/{queued.id}"))
    assert "Cancel task</button>" in before  # in the live part: it goes when the task ends
    dead = app.tasks["ui.broken"].enqueue()
    start_worker()
    wait_for(lambda: app.jobs.run(run_id).state == "succeeded", "the run")
    wait_for(lambda: queued.state == "succeeded" and dead.state == "dead", "the tasks")
    for path in (f"/tasks/{queued.id}", f"/runs/{run_id}?task=t", f"/tasks/{run_id}/t"):
        page = text(admin.get(path))
        assert "Cancel task" not in page, path
        live = text(admin.get(path, headers={"X-Redcron-Live": "1"}))
        assert "Cancel task" not in live, path
    # a dead task is discarded, not "cancelled"
    page = text(admin.get(f"/tasks/{dead.id}"))
    assert "Cancel task" not in page and "Discard from the DLQ</button>" in page
    # the API refuses to cancel an ended task
    resp = admin.post(f"/v1/tasks/{queued.id}/cancel", headers={"Authorization": f"Bearer {ADMIN}"})
    assert resp.status_code == 409


def test_one_retry_rule_for_a_task_in_a_job_and_enqueued(
    app: App,
    admin: FlaskClient,
    start_worker: Callable[..., Worker],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``retries=2`` is 3 attempts whether a job runs the task or it is enqueued,
    and the worker's log, the page and the CLI all say "of 3"."""
    caplog.set_level(logging.INFO, logger="redcron.worker.worker")
    job_id = one_task_job(app, "ui.twice", "twice")
    spec = html.unescape(text(admin.get(f"/jobs/{job_id}")))
    assert '"retries": 2' in spec  # the stored spec shows the rule's value
    run_id = app.jobs.trigger("twice", tenant=MINE)
    in_job = f"{run_id}/t"
    direct = app.tasks["ui.twice"].enqueue().id
    start_worker()
    for tid in (in_job, direct):
        wait_for(lambda tid=tid: app.broker.inspection.task_info(tid).state == "dead", tid)
        info = app.broker.inspection.task_info(tid)
        assert (info.attempt, info.max_attempts, len(info.attempts)) == (3, 3, 3)
        logged = [r.getMessage() for r in caplog.records if getattr(r, "task_id", None) == tid]
        assert [re.search(r"attempt (\d+/\d+)", m).group(1) for m in logged] == [  # type: ignore[union-attr]
            "1/3",
            "2/3",
            "3/3",
        ]
        page = text(admin.get(f"/tasks/{tid}"))
        assert '<dd class="attempts-budget">3 of 3</dd>' in page
    run_page = text(admin.get(f"/runs/{run_id}"))
    assert '<td class="num">3 / 3</td>' in run_page
