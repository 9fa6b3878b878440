"""The design's API body verbatim (issue 20 §2) and job chaining, on real Redis.

``POST /v1/jobs {name, cron, task: {image, cmd, cpu, mem}, depends_on: [],
retries: 3, timeout_s, tenant}`` is accepted as written, through the REST API,
the Python client (``app.jobs.put(body)``) and a job file, and runs as a
container task with its cpu, mem, retries and timeout (a stand-in runtime
records the argv the worker runs).  A job-level ``depends_on`` chains jobs:
C runs once each of its upstreams has had a succeeded run since C's last
chained or scheduled run; a failed upstream run does not count; a job with a
cron as well holds each cron fire until its upstreams have succeeded.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import flask
import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient
from followups import follow  # tests/helpers
from grants import grant_commands
from worker_procs import thread_workers, wait_for  # tests/helpers is on sys.path

from redcron import App, Permanent
from redcron.beat.beat import Beat
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.engine.argv import FireArgs
from redcron.engine.workers import WorkerRegistry
from redcron.errors import Conflict, NotFound, ValidationError
from redcron.keys import run_id, shard_of_id
from redcron.model.jobfile import load_jobs
from redcron.model.jobs import Task
from redcron.worker import Worker

TENANT = "acme"
OTHER = "globex"
ADMIN = "admin-token-for-chain-tests"
ENDED = ("succeeded", "failed", "cancelled")

#: the design document's request body, verbatim (DESIGN §8, issue 20 §2)
DESIGN_BODY: dict[str, Any] = {
    "name": "resize",
    "cron": "*/5 * * * *",
    "task": {"image": "alpine:3.20", "cmd": "sh -c 'echo resized'", "cpu": 0.5, "mem": "256M"},
    "depends_on": [],
    "retries": 3,
    "timeout_s": 120,
    "tenant": TENANT,
}


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    """A stand-in container runtime: records its argv, one per line, and succeeds."""
    script = tmp_path / "fake-docker"
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do echo "$a"; done > {tmp_path}/argv\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.fixture
def app(redis_url: str, key_prefix: str, runtime: Path) -> Iterator[App]:
    a = App(
        redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5, container_runtime=str(runtime)
    )

    @a.task(name="chain.ok", retries=0)
    def ok(label: str) -> str:
        return label

    @a.task(name="chain.fail", retries=0)
    def fail(label: str) -> None:
        raise Permanent(f"{label} fails")

    grant_commands(a, TENANT, OTHER)
    yield a
    a.close()


@pytest.fixture
def client(app: App) -> FlaskClient:
    web: flask.Flask = create_app(app, admin_token=ADMIN)
    c = web.test_client()
    c.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    return c


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "chain-worker") as start:
        yield start


def runs_of(app: App, tenant: str, name: str) -> list[Any]:
    return app.jobs.runs(app.jobs.job_id(name, tenant=tenant))


def wait_ended(app: App, rid: str) -> str:
    """The run's end state once it ended (a chained run may not exist yet: its
    upstream's end makes it within the maintenance interval), and what reacts
    to that end applied (chaining: follow-ups, as maintenance does)."""

    def ended() -> str | None:
        try:
            state = app.jobs.run(rid).state
        except NotFound:
            return None
        return state if state in ENDED else None

    state: str = wait_for(ended, f"run {rid} to end", 20)
    follow(app)
    return state


def wait_runs(app: App, tenant: str, name: str, n: int) -> list[Any]:
    """The job's runs once it has ``n`` and all of them ended (newest first)."""

    def ready() -> list[Any] | None:
        found = runs_of(app, tenant, name)
        return found if len(found) == n and all(r.state in ENDED for r in found) else None

    found: list[Any] = wait_for(ready, f"{n} ended runs of {name}", 20)
    return found


def ok_job(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "tenant": TENANT, "task": {"name": "chain.ok", "args": [name]}, **fields}


# -- the design's body, verbatim ------------------------------------------------------


def check_design_job(app: App, runtime: Path, start_worker: Callable[..., Worker]) -> None:
    job = app.jobs.get("resize", tenant=TENANT)
    spec = json.loads(job.spec)
    task = spec["tasks"]["resize"]
    assert task["image"] == "alpine:3.20"
    # a string cmd is split by POSIX shell rules and run without a shell
    assert task["command"] == ["sh", "-c", "echo resized"]
    assert (task["cpu"], task["mem"], task["retries"], task["timeout"]) == (0.5, "256M", 3, 120)
    assert job.cron == "*/5 * * * *" and job.depends_on == () and job.next_fire is not None
    start_worker(concurrency=1, queues=("commands",), allow_commands=True)
    rid = app.jobs.trigger("resize", tenant=TENANT)
    assert wait_ended(app, rid) == "succeeded"
    (ti,) = app.jobs.run(rid).tasks or ()
    assert getattr(ti, "max_attempts", None) in (4, None)  # retries 3 = 4 attempts
    raw = app.broker.client.hmget(
        app.broker.keys.ti(shard_of_id(rid), f"{rid}/resize"), "max_attempts", "timeout_ms", "kind"
    )
    assert [x.decode() for x in raw] == ["4", "120000", "container"]
    argv = (runtime.parent / "argv").read_text().split("\n")[:-1]
    assert argv == [
        "run", "--rm", "--cpus", "0.5", "--memory", "256M", "alpine:3.20",
        "sh", "-c", "echo resized",
    ]  # fmt: skip


def test_design_body_through_the_api(
    client: FlaskClient, app: App, runtime: Path, start_worker: Callable[..., Worker]
) -> None:
    resp = client.post("/v1/jobs", json=DESIGN_BODY)
    assert resp.status_code == 201, resp.get_json()
    assert resp.get_json()["depends_on"] == []
    check_design_job(app, runtime, start_worker)


def test_design_body_through_the_python_client(
    app: App, runtime: Path, start_worker: Callable[..., Worker]
) -> None:
    record = app.jobs.put(dict(DESIGN_BODY))
    assert record.change == "created"
    check_design_job(app, runtime, start_worker)


def test_design_body_in_a_job_file(
    app: App, tmp_path: Path, runtime: Path, start_worker: Callable[..., Worker]
) -> None:
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(DESIGN_BODY))
    app.jobs.put_many(load_jobs(path))
    check_design_job(app, runtime, start_worker)


def test_cmd_and_command_together_and_a_bad_cmd_are_400(client: FlaskClient) -> None:
    body = {**DESIGN_BODY, "task": {**DESIGN_BODY["task"], "command": ["true"]}}
    resp = client.post("/v1/jobs", json=body)
    assert resp.status_code == 400
    assert resp.get_json()["error"]["field"] == "tasks.resize.cmd"
    body = {**DESIGN_BODY, "task": {"cmd": "echo 'unclosed"}}
    resp = client.post("/v1/jobs", json=body)
    assert resp.status_code == 400 and "cannot be split" in resp.get_json()["error"]["message"]


# -- chaining ---------------------------------------------------------------------------


def test_c_runs_once_after_both_a_and_b_succeeded_and_again_after_both_again(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    app.jobs.put(ok_job("a"))
    app.jobs.put(ok_job("b"))
    c = app.jobs.put(ok_job("c", depends_on=["a", "b"]))
    assert c.depends_on == ("a", "b") and c.chained_by == "upstreams"
    assert c.waiting_for == ("a", "b") and c.next_fire is None
    start_worker(concurrency=2)

    assert wait_ended(app, app.jobs.trigger("a", tenant=TENANT)) == "succeeded"
    assert runs_of(app, TENANT, "c") == []
    assert app.jobs.get("c", tenant=TENANT).waiting_for == ("b",)
    # a second success of a alone is not b's
    assert wait_ended(app, app.jobs.trigger("a", tenant=TENANT)) == "succeeded"
    assert runs_of(app, TENANT, "c") == []
    assert wait_ended(app, app.jobs.trigger("b", tenant=TENANT)) == "succeeded"
    (first,) = wait_runs(app, TENANT, "c", 1)
    assert first.state == "succeeded" and first.trigger == "chain"
    assert app.jobs.get("c", tenant=TENANT).waiting_for == ("a", "b")

    assert wait_ended(app, app.jobs.trigger("b", tenant=TENANT)) == "succeeded"
    assert len(runs_of(app, TENANT, "c")) == 1
    assert wait_ended(app, app.jobs.trigger("a", tenant=TENANT)) == "succeeded"
    second, _first = wait_runs(app, TENANT, "c", 2)
    assert second.trigger == "chain" and second.state == "succeeded"


def test_a_failed_upstream_run_does_not_satisfy(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    app.jobs.put({"name": "f", "tenant": TENANT, "task": {"name": "chain.fail", "args": ["f"]}})
    app.jobs.put(ok_job("d", depends_on="f"))  # one name, as in a job file
    start_worker(concurrency=1)
    assert wait_ended(app, app.jobs.trigger("f", tenant=TENANT)) == "failed"
    assert runs_of(app, TENANT, "d") == []
    assert app.jobs.get("d", tenant=TENANT).waiting_for == ("f",)


def test_chained_jobs_from_a_job_file_in_any_order(app: App, tmp_path: Path) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(
        "jobs:\n"
        "  - {name: report, tenant: acme, depends_on: [extract, load],"
        " task: {name: chain.ok, args: [r]}}\n"
        "  - {name: load, tenant: acme, depends_on: extract, task: {name: chain.ok, args: [l]}}\n"
        "  - {name: extract, tenant: acme, cron: '0 2 * * *', task: {name: chain.ok, args: [e]}}\n"
    )
    changes = app.jobs.put_many(load_jobs(path))
    assert [c.name for c in changes] == ["report", "load", "extract"]
    assert app.jobs.get("report", tenant=TENANT).waiting_for == ("extract", "load")
    assert app.jobs.get("load", tenant=TENANT).depends_on == ("extract",)


# -- cron and depends_on ----------------------------------------------------------------


def cron_fire(app: App, job_id: str, fire_ms: int) -> tuple[str, str]:
    """A fire of the job's cron at ``fire_ms`` as the beat sends it (the schedule's
    own compare-and-set is fire.lua's, tested elsewhere)."""
    fired = app.broker.beat.fire_one(
        shard_of_id(job_id),
        FireArgs(job_id, "", "", fire_ms, None, None, "", "cron", 0, run_id(job_id, fire_ms)),
    )
    return fired.status, fired.run_id


def test_a_cron_fire_waits_for_its_upstreams_and_then_runs_once(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    app.jobs.put(ok_job("up"))
    report = app.jobs.put(ok_job("report", cron="0 3 * * *", depends_on=["up"]))
    assert report.chained_by == "trigger"
    jid = report.id
    t1, t2 = 1_800_000_000_000, 1_800_000_300_000
    assert cron_fire(app, jid, t1) == ("waiting", run_id(jid, t1))
    waiting = app.jobs.get("report", tenant=TENANT)
    assert waiting.waiting_for == ("up",) and waiting.waiting_fire is not None
    assert int(waiting.waiting_fire.timestamp() * 1000) == t1
    # one fire waits; a later one meanwhile is recorded as skipped, never dropped
    assert cron_fire(app, jid, t2) == ("skipped", run_id(jid, t2))
    assert [r.state for r in runs_of(app, TENANT, "report")] == ["skipped"]
    start_worker(concurrency=2)
    assert wait_ended(app, app.jobs.trigger("up", tenant=TENANT)) == "succeeded"
    # the waiting fire runs under its own fire time's run id
    assert wait_ended(app, run_id(jid, t1)) == "succeeded"
    assert app.jobs.run(run_id(jid, t1)).trigger == "cron"
    assert app.jobs.get("report", tenant=TENANT).waiting_fire is None
    # the success was used up by that run: the next cron fire waits again
    t3 = t2 + 300_000
    assert cron_fire(app, jid, t3)[0] == "waiting"
    # and an upstream that succeeded before the fire lets it through at once
    app.broker.client.hdel(app.broker.keys.job(shard_of_id(jid), jid), "chain_wait")
    assert wait_ended(app, app.jobs.trigger("up", tenant=TENANT)) == "succeeded"
    t4 = t3 + 300_000
    assert cron_fire(app, jid, t4) == ("created", run_id(jid, t4))
    # a manual trigger runs at once and uses nothing up
    assert app.jobs.get("report", tenant=TENANT).waiting_for == ("up",)
    assert wait_ended(app, app.jobs.trigger("report", tenant=TENANT)) == "succeeded"


# -- refusals ---------------------------------------------------------------------------


def test_cycles_unknown_names_and_other_tenants_are_refused(app: App, client: FlaskClient) -> None:
    app.jobs.put(ok_job("a"))
    app.jobs.put(ok_job("b", depends_on=["a"]))
    app.jobs.put(ok_job("c", depends_on=["b"]))
    with pytest.raises(ValidationError, match=r"job dependency cycle: a -> c -> b -> a") as exc:
        app.jobs.put(ok_job("a", depends_on=["c"]))
    assert exc.value.field == "depends_on"
    assert app.jobs.get("a", tenant=TENANT).depends_on == ()  # nothing written
    resp = client.post("/v1/jobs", json=ok_job("a", depends_on=["a"]))
    assert resp.status_code == 400 and resp.get_json()["error"]["field"] == "depends_on"
    assert "itself" in resp.get_json()["error"]["message"]
    resp = client.post("/v1/jobs", json=ok_job("x", depends_on=["nope"]))
    assert resp.status_code == 400
    err = resp.get_json()["error"]
    assert err["field"] == "depends_on" and "unknown job 'nope'" in err["message"]
    # another tenant's job is never visible: the same answer as an unknown one
    app.jobs.put({**ok_job("secret"), "tenant": OTHER})
    resp = client.post("/v1/jobs", json=ok_job("x", depends_on=["secret"]))
    assert resp.status_code == 400
    assert resp.get_json()["error"]["message"] == (
        f"unknown job 'secret' of tenant {TENANT!r}; create it first"
    )
    # an upstream others depend on is not deleted; a dependent is
    with pytest.raises(Conflict, match="upstream of b"):
        app.jobs.delete("a", tenant=TENANT)
    app.jobs.delete("c", tenant=TENANT)
    app.jobs.delete("b", tenant=TENANT)
    app.jobs.delete("a", tenant=TENANT)


def test_the_lua_check_refuses_what_slips_past_python(app: App) -> None:
    """Two writers racing: the cycle is refused by job_put.lua itself."""
    app.jobs.put(ok_job("a"))
    app.jobs.put(ok_job("b", depends_on=["a"]))
    # what a client that checked before b existed would send
    spec = Task("chain.ok", args=["a"])
    with pytest.raises(ValidationError, match="cycle: a -> b -> a"):
        app.jobs.put("a", tasks={"a": spec}, tenant=TENANT, depends_on=["b"])


# -- what a waiting job waits for: jobs show and the job page --------------------------


def test_jobs_show_and_the_job_page_say_what_a_waiting_job_waits_for(
    app: App, tmp_path: Path, redis_url: str, start_worker: Callable[..., Worker]
) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(
        "jobs:\n"
        "  - {name: a, tenant: acme, task: {name: chain.ok, args: [a]}}\n"
        "  - {name: b, tenant: acme, task: {name: chain.ok, args: [b]}}\n"
        "  - {name: c, tenant: acme, depends_on: [a, b], task: {name: chain.ok, args: [c]}}\n"
    )
    prefix = app.settings.prefix
    runner = CliRunner()

    def invoke(*args: str) -> str:
        result = runner.invoke(main, [*args, "--redis", redis_url], env={"REDCRON_PREFIX": prefix})
        assert result.exit_code == 0, result.output
        return result.output

    # the live worker registers chain.ok: jobs apply without -A accepts the file
    start_worker(concurrency=1)
    wait_for(lambda: WorkerRegistry(app.broker).list(), "the worker to register")
    invoke("jobs", "apply", "-f", str(path))
    assert wait_ended(app, app.jobs.trigger("a", tenant=TENANT)) == "succeeded"
    out = invoke("jobs", "show", "c", "--tenant", TENANT)
    assert "depends on" in out and "waiting for b" in out, out
    info = json.loads(invoke("jobs", "show", "c", "--tenant", TENANT, "--json"))
    assert (info["depends_on"], info["waiting_for"], info["chained_by"]) == (
        ["a", "b"], ["b"], "upstreams",
    )  # fmt: skip

    web = create_app(app, admin_token=ADMIN)
    browser = web.test_client()
    browser.get("/login")
    with browser.session_transaction() as session:
        csrf = session["csrf_token"]
    browser.post("/login", data={"token": ADMIN, "csrf_token": csrf})
    page = browser.get(f"/jobs/{app.jobs.job_id('c', tenant=TENANT)}").get_data(as_text=True)
    assert 'id="depends-on"' in page
    assert '<code>a</code> <span class="muted">(succeeded)</span>' in page
    assert '<code>b</code> <span class="muted">(waiting)</span>' in page
    assert "waiting for b" in page
    listing = browser.get("/jobs").get_data(as_text=True)
    # the schedule cell of a job its upstreams start (not "manual only (trigger it)")
    assert 'after a, b (chained) <span class="muted chain">waiting for b</span>' in listing
    assert "after a, b" in invoke("jobs", "list", "--tenant", TENANT)


def test_the_beat_holds_a_due_fire_and_records_the_fires_after_it(app: App) -> None:
    """A real beat tick over an every-second job whose upstream has not succeeded:
    the first due fire waits, the later ones are skipped runs, and the upstream's
    success starts the waiting fire under its own run id."""
    up = app.jobs.put(ok_job("up"))
    job = app.jobs.put(ok_job("poll", every="1s", depends_on=["up"]))
    shard = job.shard
    start = (app.broker.server_ms() // 1000 - 3) * 1000
    k = app.broker.keys
    app.broker.client.hset(k.job(shard, job.id), "next_fire", start)
    app.broker.client.zadd(k.schedule(shard), {job.id: start})
    Beat(app, name="b1").tick()
    waiting = app.jobs.get("poll", tenant=TENANT)
    assert waiting.waiting_fire is not None
    assert int(waiting.waiting_fire.timestamp() * 1000) == start
    later = runs_of(app, TENANT, "poll")
    assert later and all(r.state == "skipped" for r in later)
    assert all("still waiting for its upstream" in (r.reason or "") for r in later)
    # the upstream succeeds (its task reported by hand: no worker needed)
    app.jobs.trigger("up", tenant=TENANT)
    (lease,) = app.broker.leases.lease(shard, "w1", 1, 60_000, ["default"])
    assert lease.iid.startswith(up.id)
    assert app.broker.leases.complete(shard, "w1", [(lease.iid, lease.epoch, b"\xc0")]) == [True]
    follow(app)  # the waiting fire starts from the upstream's end: a follow-up
    held = app.jobs.run(run_id(job.id, start))
    assert held.state == "queued" and held.trigger in ("every", "catchup")
    assert app.jobs.get("poll", tenant=TENANT).waiting_fire is None


def test_a_chain_through_the_api(client: FlaskClient, app: App) -> None:
    assert client.post("/v1/jobs", json=ok_job("a")).status_code == 201
    resp = client.post("/v1/jobs", json=ok_job("c", depends_on=["a"]))
    assert resp.status_code == 201, resp.get_json()
    job = client.get(f"/v1/jobs/{resp.get_json()['id']}").get_json()
    assert (job["depends_on"], job["chained_by"], job["waiting_for"], job["waiting_fire"]) == (
        ["a"], "upstreams", ["a"], None,
    )  # fmt: skip
    refused = client.delete(f"/v1/jobs/{app.jobs.job_id('a', tenant=TENANT)}")
    assert refused.status_code == 409 and "upstream of c" in refused.get_json()["error"]["message"]
    # a PUT without depends_on unchains c; then a may go
    cid = resp.get_json()["id"]
    assert client.put(f"/v1/jobs/{cid}", json=ok_job("c")).status_code == 200
    assert client.get(f"/v1/jobs/{cid}").get_json()["depends_on"] == []
    assert client.delete(f"/v1/jobs/{app.jobs.job_id('a', tenant=TENANT)}").status_code == 204
