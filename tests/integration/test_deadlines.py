"""Deadlines through every face (issue 21 §2): ``deadline_s`` declared in the
Python API, a job file, ``POST /v1/jobs`` and the CLI's ``jobs apply``, refused
with an error naming the field; a run still going past it marked late by a
beat's tick (an INFO line), shown by ``runs list``/``runs show``, the run page
and the job page, and counted per tenant in ``/metrics``.

No sleeping: a manual run triggered with an explicit ``now`` in the past is
already past its deadline on the server clock the beat reads.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import flask
import pytest
from cli_fixtures import Invoke, invoke_fixture, prefix_fixture  # noqa: F401 (fixtures)
from prometheus_client.parser import text_string_to_metric_families

from redcron import App
from redcron.beat.beat import Beat
from redcron.dashboard import create_app
from redcron.errors import ValidationError
from redcron.model.jobfile import JobFileError, load_jobs
from redcron.model.jobs import Task, job_spec, spec_from_json

TENANT = "acme"
ADMIN = "deadline-admin-token"
TASKS = {"a": Task("t")}


@pytest.fixture
def app(redis_url: str, prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=prefix)
    yield a
    a.close()


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


def late_run(app: App, name: str = "nightly", deadline_s: float = 60) -> str:
    """A manual run of a job with ``deadline_s`` triggered twice its deadline
    ago (server clock): still queued, so late at the next sweep."""
    app.jobs.put(
        name,
        tasks=TASKS,
        tenant=TENANT,
        deadline_s=deadline_s,
        overlap="allow",
        allow_unregistered=True,
    )
    past = app.broker.server_ms() - int(2 * deadline_s * 1000)
    return app.jobs.trigger(name, tenant=TENANT, now=past)


def scrape(
    web: flask.Flask, query: str = ""
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    resp = web.test_client().get("/metrics" + query)
    assert resp.status_code == 200
    out = {}
    for family in text_string_to_metric_families(resp.get_data(as_text=True)):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def job_spec_of(app: App, name: str) -> Any:
    return spec_from_json(app.jobs.get(name, tenant=TENANT).spec)


# -- the beat -------------------------------------------------------------------------


def test_a_beat_tick_marks_a_late_run_once_and_logs_it(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    rid = late_run(app)
    on_time = app.jobs.trigger("nightly", tenant=TENANT)  # its deadline is a minute ahead
    caplog.set_level(logging.INFO, logger="redcron.beat")
    beat = Beat(app, name="b1", apply_declared=False)
    beat.tick()
    run = app.jobs.run(rid)
    assert run.late and run.state == "queued"
    assert app.jobs.run(on_time).late_at is None
    lines = [r.getMessage() for r in caplog.records if "is late" in r.getMessage()]
    assert len(lines) == 1 and rid in lines[0] and "not ended 60s after" in lines[0], lines
    assert {r.levelname for r in caplog.records if "is late" in r.getMessage()} == {"INFO"}
    [event] = [e for e in app.jobs.events() if e.type == "run_late"]
    assert event.job_id == run.job_id

    # another beat (no memory of the first's sweeps) finds nothing more to mark
    caplog.clear()
    Beat(app, name="b2", apply_declared=False).tick()
    beat.tick()
    assert not [r for r in caplog.records if "is late" in r.getMessage()]
    assert len([e for e in app.jobs.events() if e.type == "run_late"]) == 1
    beat.close()


def test_a_beat_sweeps_only_the_shards_it_owns(redis_url: str, prefix: str) -> None:
    app = App(redis_url, prefix=prefix, shards=4)
    try:
        rid = late_run(app)
        shard = app.jobs.get("nightly", tenant=TENANT).shard
        beat = Beat(app, name="b1", apply_declared=False)
        beat._deadlines.sweep(beat.engine, [s for s in range(4) if s != shard], 0)
        assert app.jobs.run(rid).late_at is None
        beat.tick()  # takes every free shard, this one too
        assert shard in beat.owned and app.jobs.run(rid).late
        beat.close()
    finally:
        app.close()


# -- the CLI --------------------------------------------------------------------------


def test_runs_list_and_show_mark_a_late_run(app: App, invoke: Invoke) -> None:
    rid = late_run(app)
    on_time = app.jobs.trigger("nightly", tenant=TENANT)
    Beat(app, name="b1", apply_declared=False).tick()

    result = invoke("runs", "list", "--job", "nightly", "--tenant", TENANT)
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "queued late" in rows[rid]
    assert "late" not in rows[on_time]

    shown = invoke("runs", "show", rid)
    assert shown.exit_code == 0, shown.output
    assert "queued late" in shown.stdout
    assert "(late: still going at " in shown.stdout

    listed = json.loads(invoke("runs", "list", "--tenant", TENANT, "--json").stdout)
    by_id = {r["id"]: r for r in listed}
    assert by_id[rid]["late_at"] and by_id[rid]["deadline_at"]
    assert by_id[on_time]["late_at"] is None and by_id[on_time]["deadline_at"]

    job = invoke("jobs", "show", "nightly", "--tenant", TENANT)
    assert "60s after each fire" in job.stdout


def test_jobs_apply_takes_a_deadline_and_refuses_a_bad_one(
    app: App, invoke: Invoke, tmp_path: Path
) -> None:
    good = tmp_path / "jobs.yaml"
    good.write_text("name: report\ntenant: acme\ndeadline_s: 900\ntasks: {a: t}\n")
    assert invoke("jobs", "apply", "-f", str(good), "--allow-unregistered").exit_code == 0
    assert app.jobs.get("report", tenant=TENANT).shard == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: report\ntenant: acme\ndeadline_s: -5\ntasks: {a: t}\n")
    result = invoke("jobs", "apply", "-f", str(bad))
    assert result.exit_code != 0
    assert "deadline_s" in result.stderr and "> 0" in result.stderr, result.stderr


# -- the REST API and the pages -------------------------------------------------------


def test_post_jobs_takes_deadline_s_and_refuses_bad_values(app: App, web: flask.Flask) -> None:
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    body = {"name": "api", "tenant": TENANT, "tasks": {"a": {"ref": "t"}}}
    url = "/v1/jobs?allow_unregistered=true"  # no app here registers "t"
    resp = client.post(url, json={**body, "deadline_s": 120})
    assert resp.status_code == 201, resp.get_data(as_text=True)
    assert job_spec_of(app, "api").deadline_s == 120
    for bad in (0, -1, "soon", True, 1e400):
        resp = client.post(url, data=json.dumps({**body, "deadline_s": bad}),
                           content_type="application/json")  # fmt: skip
        assert resp.status_code == 400, (bad, resp.get_data(as_text=True))
        err = resp.get_json()["error"]
        assert err["field"] == "deadline_s", err
        assert "finite number" in err["message"], err  # Infinity: refused at parse


def test_the_run_and_job_pages_mark_a_late_run(app: App, web: flask.Flask) -> None:
    rid = late_run(app)
    Beat(app, name="b1", apply_declared=False).tick()
    client = web.test_client()
    assert client.get("/login").status_code == 200
    with client.session_transaction() as session:
        csrf = session["csrf_token"]
    assert client.post("/login", data={"token": ADMIN, "csrf_token": csrf}).status_code in (
        302,
        303,
    )
    page = client.get(f"/runs/{rid}").get_data(as_text=True)
    assert 'id="run-late"' in page and 'class="badge state-late"' in page
    assert 'id="run-deadline"' in page and "still going at" in page
    job_id = app.jobs.get("nightly", tenant=TENANT).id
    page = client.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert 'class="badge state-late"' in page
    assert 'id="deadline"' in page and "after each fire" in page
    assert app.jobs.get_by_id(job_id).deadline_s == 60


def test_metrics_count_late_runs_per_tenant(app: App, web: flask.Flask) -> None:
    late_run(app, "one")
    late_run(app, "two")
    app.jobs.put("other", tasks=TASKS, tenant="globex", deadline_s=30, allow_unregistered=True)
    app.jobs.trigger("other", tenant="globex", now=app.broker.server_ms() - 60_000)
    Beat(app, name="b1", apply_declared=False).tick()
    # per-tenant series are the busiest tenants' and those the scrape names
    m = scrape(web, f"?tenant={TENANT}&tenant=globex")
    assert m[("redcron_runs_late_total", (("tenant", TENANT),))] == 2
    assert m[("redcron_runs_late_total", (("tenant", "globex"),))] == 1
    assert m[("redcron_runs_late_all_total", ())] == 3


# -- validation -----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "300", True, 10**12])
def test_deadline_s_must_be_a_positive_finite_number(bad: Any) -> None:
    with pytest.raises(ValidationError) as err:
        job_spec("j", tasks=TASKS, deadline_s=bad)
    assert err.value.field == "deadline_s"
    assert "finite number of seconds > 0" in str(err.value)


def test_a_job_file_names_the_job_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n  - {name: j, deadline_s: nope, tasks: {a: t}}\n")
    with pytest.raises(JobFileError) as err:
        load_jobs(path)
    assert "deadline_s" in str(err.value) and "'j'" in str(err.value), str(err.value)
    assert job_spec("j", tasks=TASKS, deadline_s=0.25).deadline_ms() == 250
    assert job_spec("j", tasks=TASKS).deadline_ms() is None
