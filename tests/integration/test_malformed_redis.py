"""Data an operator could write by hand with redis-cli: a ready entry naming a
missing instance, instance hashes with garbage fields, a job with a broken
spec, a tenant with a non-numeric weight, a DLQ entry with missing fields, a
token hash with missing fields.  A worker process and a beat run over it:
neither crashes nor loops, the bad instance is dead-lettered with a clear
error (or skipped with a warning), and the good work goes on."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import flask
import pytest
import redis
from beats import tick_until
from click.testing import CliRunner
from worker_procs import (  # noqa: F401 (app_fixture: the chaos app's client, as ``app``)
    WorkerProc,
    app_fixture,
    wait_for,
    worker_spawner,
)

from redcron import App
from redcron.beat.beat import Beat
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.keys import shard_of
from redcron.model.jobs import Task
from redcron.store.tokens import TokenStore

TERMINAL = ("succeeded", "dead", "cancelled", "failed")


@pytest.fixture
def spawn(redis_url: str, key_prefix: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProc]]:
    with worker_spawner(redis_url, key_prefix, tmp_path, concurrency=2, grace=1.0) as start:
        yield start


def ti(app: App, iid: str) -> str:
    return app.broker.keys.ti(int(iid.split("-")[0]), iid)


def ended(app: App, iid: str, timeout: float = 20) -> Any:
    return wait_for(
        lambda: (i := app.broker.inspection.task_info(iid)).state in TERMINAL and i,
        f"{iid} to end",
        timeout,
    )


def no_traceback(proc: WorkerProc) -> None:
    log = proc.log()
    assert "Traceback" not in log, log
    assert proc.poll() is None, f"the worker exited:\n{log}"


def test_worker_over_garbage_instances(app: App, r: redis.Redis, spawn: Any) -> None:
    shard = shard_of("default", app.broker.shards)
    stream = app.broker.keys.q(shard, "default", "default", "normal")
    # the first enqueue makes the stream and its consumer group (a stream made by a
    # hand-written XADD has no group: the lease script then fails with NOGROUP)
    first = app.tasks["echo"].enqueue("first")
    # ready entries naming instances that do not exist
    r.xadd(stream, {"i": f"{shard}-MISSING"})
    r.xadd(stream, {"nothing": "here"})
    bad = {}
    for what, change in {
        "args": {"args": b"\xc1\xff\x00"},
        "max_attempts": {"max_attempts": "many"},
        "timeout": {"timeout_ms": "soon"},
    }.items():
        handle = app.tasks["echo"].enqueue(what)
        r.hset(ti(app, handle.id), mapping=change)
        bad[what] = handle.id
    nameless = app.tasks["echo"].enqueue("nameless")
    r.hdel(ti(app, nameless.id), "name")
    bad["name"] = nameless.id
    worker = spawn(queues=["default"])
    good = [first, *(app.tasks["echo"].enqueue(i) for i in range(5))]
    for handle in good:
        assert handle.result(timeout=20) == handle.info().decoded_args()[0][0]
    outcomes = {}
    for what, iid in bad.items():
        info = wait_for(
            lambda iid=iid: (i := app.broker.inspection.task_info(iid)).state != "ready" and i,
            f"the {what} instance to be dealt with",
            timeout=20,
        )
        outcomes[what] = (info.state, info.error)
    time.sleep(1.0)  # the worker keeps going (no crash, no busy loop on the garbage)
    no_traceback(worker)
    print(outcomes)
    # undecodable arguments: dead-lettered, the error says so
    state, error = outcomes["args"]
    assert state == "dead" and error and "args" in error.lower(), outcomes["args"]
    # a lease row the worker could not use was skipped with a warning, reaped and
    # leased again forever: dead-lettered once, the error names the field
    # (off the stream at once; dead-lettered by the next maintenance pass)
    for what, why in {
        "name": "name is missing",
        "timeout": "timeout_ms 'soon' is not a number",
    }.items():
        info = ended(app, bad[what])
        assert (info.state, info.error) == (
            "dead",
            f"malformed task record: {why}; fix or discard it",
        ), what
    dead = [e.task_id for e in app.broker.dlq.list("default")]
    assert sorted(dead) == sorted({bad["args"], bad["name"], bad["timeout"]}), dead
    assert "skipping malformed lease" not in worker.log()
    # more good work after the garbage
    assert app.tasks["echo"].enqueue("after").result(timeout=20) == "after"


def test_beat_over_a_broken_job(app: App, r: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    broken = app.jobs.put("broken", tasks={"t": Task("echo", args=[1])}, every="1s")
    app.jobs.put("fine", tasks={"t": Task("echo", args=[2])}, every="1s")
    job_key = app.broker.keys.job(broken.shard, broken.id)
    r.hset(job_key, mapping={"spec": "{not json", "template": "[{broken"})
    beat = Beat(app, name="b1", shard_ttl=2.0)
    fine = app.jobs.get("fine")
    tick_until(beat, lambda: app.jobs.runs(fine.id, 10), "the good job to fire", timeout=15)
    # listing jobs still works (the broken one shown as it can be, or left out)
    result = CliRunner().invoke(
        main,
        ["jobs", "list", "--redis", app.settings.redis_url],
        env={"REDCRON_PREFIX": app.settings.prefix},
    )
    assert "Traceback" not in result.output
    assert result.exit_code == 0, result.output


def test_tenant_with_a_non_numeric_weight(app: App, r: redis.Redis, spawn: Any) -> None:
    shard = shard_of("default", app.broker.shards)
    app.tenants.set("default", weight=2)
    r.hset(app.broker.keys.tenant(shard, "default"), mapping={"weight": "heavy", "rate": "fast"})
    worker = spawn(queues=["default"])
    assert app.tasks["echo"].enqueue("x").result(timeout=20) == "x"
    no_traceback(worker)
    result = CliRunner().invoke(
        main,
        ["tenants", "list", "--redis", app.settings.redis_url],
        env={"REDCRON_PREFIX": app.settings.prefix},
    )
    assert "Traceback" not in result.output


def test_dlq_entry_with_missing_fields(app: App, r: redis.Redis) -> None:
    shard = shard_of("acme", app.broker.shards)
    dlq = app.broker.keys.dlq(shard, "acme")
    r.xadd(dlq, {"i": f"{shard}-GONE"})
    r.xadd(dlq, {"junk": "x"})
    entries = app.broker.dlq.list("acme", 10)
    assert len(entries) <= 2
    web: flask.Flask = create_app(app, admin_token="t")
    resp = web.test_client().get("/v1/tenants/acme/dlq", headers={"Authorization": "Bearer t"})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    result = CliRunner().invoke(
        main, ["dlq", "list", "--tenant", "acme", "--redis", app.settings.redis_url],
        env={"REDCRON_PREFIX": app.settings.prefix},
    )  # fmt: skip
    assert "Traceback" not in result.output and result.exit_code in (0, 1), result.output


@pytest.mark.parametrize(
    "change",
    [
        {"id": None},
        {"created": "yesterday"},
        {"kind": None},
        {"kind": "root"},
        {"queues": None},
        {"tenant": None},
        {"tenant": ""},
        {"sha256": None},
    ],
)
def test_token_hash_with_missing_fields(app: App, r: redis.Redis, change: dict[str, Any]) -> None:
    tokens = TokenStore(app.broker)
    info, secret = tokens.create_tenant("acme")
    key = app.broker.keys.token(info.id)
    for field, value in change.items():
        if value is None:
            r.hdel(key, field)
        else:
            r.hset(key, field, value)
    web: flask.Flask = create_app(app, admin_token="admin")
    client = web.test_client()
    app.jobs.put("other", tenant="zeta", tasks={"t": Task("echo")})
    resp = client.get("/v1/jobs", headers={"Authorization": f"Bearer {secret}"})
    # a 500 before (KeyError 'id', int('yesterday')); a tenant token without its
    # tenant saw every tenant's jobs
    assert resp.status_code in (200, 401), resp.get_data(as_text=True)
    if resp.status_code == 200:
        assert [j["tenant"] for j in resp.get_json()["jobs"]] == [], resp.get_json()
    if "tenant" in change or "kind" in change or "sha256" in change:
        assert resp.status_code == 401
    tokens.list()  # the listing (redcron tenants token list) copes too
    result = CliRunner().invoke(
        main, ["tenants", "token", "list", "--redis", app.settings.redis_url],
        env={"REDCRON_PREFIX": app.settings.prefix},
    )  # fmt: skip
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("change", "why"), [({"epoch": "abc"}, "epoch 'abc'"), ({"attempt": "x"}, "attempt 'x'")]
)
def test_worker_over_a_non_numeric_epoch_or_attempt(
    app: App, r: redis.Redis, spawn: Any, change: dict[str, str], why: str
) -> None:
    # lease.lua did arithmetic on tonumber(epoch/attempt): every lease call of the
    # shard failed, the worker backed off and retried forever
    handle = app.tasks["echo"].enqueue("bad")
    r.hset(ti(app, handle.id), mapping=change)
    worker = spawn(queues=["default"])
    good = app.tasks["echo"].enqueue("good")
    assert good.result(timeout=8) == "good"
    info = ended(app, handle.id)
    assert info.state == "dead" and info.error == (
        f"malformed task record: {why} is not a number; fix or discard it"
    )
    assert [e.task_id for e in app.broker.dlq.list("default")] == [handle.id]
    no_traceback(worker)


def test_an_unknown_state_is_shown_as_it_is(app: App, r: redis.Redis) -> None:
    # TaskState("bogus") raised ValueError: task show, the API (500) and the page failed
    handle = app.tasks["echo"].enqueue("odd")
    r.hset(ti(app, handle.id), mapping={"state": "bogus", "a:x:outcome": "?"})
    assert app.broker.inspection.task_info(handle.id).state == "bogus"
    result = CliRunner().invoke(
        main, ["task", "show", handle.id, "--redis", app.settings.redis_url],
        env={"REDCRON_PREFIX": app.settings.prefix},
    )  # fmt: skip
    assert result.exit_code == 0 and "bogus" in result.output, result.output
    web: flask.Flask = create_app(app, admin_token="t")
    client = web.test_client()
    resp = client.get(f"/v1/tasks/{handle.id}", headers={"Authorization": "Bearer t"})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.get_json()["state"] == "bogus"
    client.get("/login")
    with client.session_transaction() as session:
        csrf = session["csrf_token"]
    assert client.post("/login", data={"token": "t", "csrf_token": csrf}).status_code == 303
    for path in (f"/tasks/{handle.id}", "/tasks"):
        page = client.get(path)
        assert page.status_code == 200 and "bogus" in page.get_data(as_text=True), path
    listing = CliRunner().invoke(
        main, ["task", "list", "--redis", app.settings.redis_url],
        env={"REDCRON_PREFIX": app.settings.prefix},
    )  # fmt: skip
    assert listing.exit_code == 0 and "bogus" in listing.output, listing.output
