"""``durability="strict"`` on the session server (no replica): acknowledging writes
wait for a replica and fail clearly when none confirms; one server needs
``appendfsync always``.  The failover with a replica is tests/integration/test_sentinel.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from worker_procs import thread_workers, wait_for  # tests/helpers

from redcron import App, NotReplicated
from redcron.dashboard import create_app
from redcron.errors import ConfigError
from redcron.model.jobs import Task, job_spec


@pytest.fixture
def strict(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), durability="strict", durability_timeout=0.1)

    @a.task(name="noop")
    def noop() -> None:
        return None

    yield a
    a.close()


def test_an_enqueue_no_replica_confirms_raises_not_replicated(strict: App) -> None:
    began = time.monotonic()
    with pytest.raises(NotReplicated, match="0 of the 1 replicas asked for confirmed it") as err:
        strict.enqueue("noop")
    assert time.monotonic() - began < 2
    # the write did happen on the master: it is the confirmation that is missing,
    # and the error names the task so the caller can look it up instead of resending
    assert [(t.tenant, t.ready) for t in strict.broker.inspection.inspect()] == [("default", 1)]
    assert err.value.task_ids is not None and len(err.value.task_ids) == 1
    (task_id,) = err.value.task_ids
    assert task_id in str(err.value) and strict.get(task_id).state == "ready"


def test_a_pipelined_acknowledging_write_waits_too(strict: App) -> None:
    with pytest.raises(NotReplicated):
        strict.tasks["noop"].enqueue_many([()] * 300)  # more than one script call


def test_writes_that_acknowledge_nothing_do_not_wait(strict: App) -> None:
    assert strict.broker.leases.lease(0, "w", 1, 2000, ["default"]) == []
    assert strict.broker.server_ms() > 0


def test_strict_reloads_scripts_after_a_flush(strict: App, r: redis.Redis) -> None:
    r.script_flush()
    with pytest.raises(NotReplicated):
        strict.enqueue("noop")  # NOSCRIPT, loaded, run again, then WAIT


def test_strict_on_one_server_needs_appendfsync_always(redis_url: str, key_prefix: str) -> None:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), durability="strict", durability_replicas=0)
    try:
        with pytest.raises(ConfigError, match="appendfsync always"):
            a.broker.ensure_meta()
    finally:
        a.close()


def test_a_report_resent_after_an_unconfirmed_write_is_not_called_lost(
    redis_url: str, key_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The first report lands on the master but WAIT falls short (NotReplicated):
    the worker sends it again, Redis refuses it (the attempt already ended), and
    the worker recognises its own outcome in the record instead of warning that
    the lease was lost."""
    app = App(redis_url, prefix=key_prefix.rstrip(":"))

    @app.task(name="noop")
    def noop() -> None:
        return None

    real = app.broker.leases.report_and_lease
    unconfirmed: list[int] = []

    def first_unconfirmed(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        if args[2] and not unconfirmed:  # the first call carrying a completion
            unconfirmed.append(1)
            raise NotReplicated("written on the master, but 0 of the 1 replicas confirmed it")
        return result

    app.broker.leases.report_and_lease = first_unconfirmed  # type: ignore[method-assign]
    handle = noop.enqueue()
    caplog.set_level(logging.INFO, logger="redcron.worker.worker")
    with thread_workers(app, "strict-worker") as start:
        start(prefetch=0)
        wait_for(lambda: handle.state == "succeeded", "the task to succeed")
        wait_for(
            lambda: "results were already written" in caplog.text, "the resend to be recognised"
        )
    assert unconfirmed and handle.attempts == 1
    assert "leases were lost" not in caplog.text
    app.close()


# -- not replicated: the ids, in Python and over HTTP (issue 30 §2.2) ----------------

ADMIN = "strict-admin-token"


def test_a_folded_enqueue_not_replicated_names_the_existing_task(
    redis_url: str, key_prefix: str, strict: App
) -> None:
    # the unique key's first task, written without waiting; the strict call folds
    # into it: the id to look up is that task's, not the one the call made up
    plain = App(redis_url, prefix=key_prefix.rstrip(":"))
    plain.task(name="once", unique_for=60)(lambda: None)
    strict.task(name="once", unique_for=60)(lambda: None)
    first = plain.enqueue("once")
    with pytest.raises(NotReplicated) as err:
        strict.enqueue("once")
    assert err.value.task_ids == [first.id] and err.value.ids == [first.id]
    plain.close()


def test_a_trigger_not_replicated_names_its_run(
    redis_url: str, key_prefix: str, strict: App
) -> None:
    plain = App(redis_url, prefix=key_prefix.rstrip(":"))
    plain.jobs.put(
        job_spec("nightly", tasks={"t": Task("noop")}, cron="0 2 * * *"), allow_unregistered=True
    )
    with pytest.raises(NotReplicated) as err:
        strict.jobs.trigger("nightly")
    assert err.value.run_id is not None and err.value.ids == [err.value.run_id]
    assert err.value.run_id in str(err.value)
    assert plain.jobs.run(err.value.run_id).id == err.value.run_id  # it was created
    plain.close()


def test_the_api_answers_202_with_the_ids_of_writes_not_replicated(
    redis_url: str, key_prefix: str, strict: App
) -> None:
    """A failover under durability=strict used to be a 500 with a traceback, the
    task id lost, though the task ran: a client that retried enqueued twice."""
    plain = App(redis_url, prefix=key_prefix.rstrip(":"))
    plain.jobs.put(
        job_spec("nightly", tasks={"t": Task("noop")}, cron="0 2 * * *"), allow_unregistered=True
    )
    web = create_app(strict, admin_token=ADMIN)
    client = web.test_client()
    auth = {"Authorization": f"Bearer {ADMIN}"}

    resp = client.post("/v1/tasks", json={"name": "noop"}, headers=auth)
    assert resp.status_code == 202, resp.get_data(as_text=True)
    body = resp.get_json()
    assert body["replicated"] is False and "replicas" in body["message"]
    assert body["id"] and body["state"] == "ready"  # the task's record: it is queued
    assert plain.get(body["id"]).state == "ready"
    assert [t.ready for t in plain.broker.inspection.inspect()] == [1]  # once

    job_id = plain.jobs.get("nightly").id
    resp = client.post(f"/v1/jobs/{job_id}/trigger", json={}, headers=auth)
    assert resp.status_code == 202, resp.get_data(as_text=True)
    body = resp.get_json()
    assert body["replicated"] is False
    assert plain.jobs.run(body["run_id"]).id == body["run_id"]

    # any other acknowledged write: 202 too, never a 500
    resp = client.post(f"/v1/jobs/{job_id}/pause", json={}, headers=auth)
    assert resp.status_code == 202, resp.get_data(as_text=True)
    assert resp.get_json()["replicated"] is False
    # and the contract says so, for each route whose writes wait
    paths = client.get("/v1/openapi.json").get_json()["paths"]
    for path, method in (
        ("/v1/tasks", "post"),
        ("/v1/jobs/{job_id}/trigger", "post"),
        ("/v1/jobs/{job_id}/pause", "post"),
        ("/v1/worker/complete", "post"),
    ):
        assert "202" in paths[path][method]["responses"], path
    assert "202" not in paths["/v1/jobs"]["get"]["responses"]
    plain.close()
