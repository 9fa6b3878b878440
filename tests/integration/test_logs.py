"""What the worker and the beat log at INFO (issue 9): a line per finished
attempt, a line per fire, and banners that name Redis without its password.

The tests read the records' fields (``extra``), the same ones
``--log-format json`` prints as keys; they wait for a record, never for time.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable

import pytest
from beats import runs_of  # tests/helpers
from server_time import server_ms  # tests/helpers
from worker_procs import (  # noqa: F401 (fixtures)
    app_fixture,
    chaos_app_client,
    start_worker_fixture,
    thread_workers,
    wait_for,
)

from redcron import App, TaskFailed
from redcron.beat.beat import Beat
from redcron.model.jobs import Task
from redcron.model.serialize import iso
from redcron.schedule.timeutil import from_ms
from redcron.worker import Worker

WORKER_LOG = "redcron.worker.worker"
BEAT_LOG = "redcron.beat.beat"
SECRET_URL = "redis://ops:s3cret@redis.internal:6380/2"


def ended(caplog: pytest.LogCaptureFixture, task_id: str, n: int) -> list[logging.LogRecord]:
    """The first ``n`` attempt lines of a task, once they are all there."""

    def lines() -> list[logging.LogRecord]:
        got = [r for r in caplog.records if getattr(r, "task_id", None) == task_id]
        return got if len(got) >= n else []

    return list(wait_for(lines, f"{n} attempt lines of {task_id}"))


def test_a_retry_then_a_success_each_get_a_line(
    app: App, start_worker: Callable[..., Worker], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    start_worker(concurrency=2)
    h = app.enqueue("retry_later", 0.3, _tenant="acme")  # retries=2: up to 3 attempts
    assert h.result(timeout=30) == 2
    retry, success = ended(caplog, h.id, 2)
    for rec, attempt in ((retry, 1), (success, 2)):
        assert (rec.task, rec.tenant, rec.queue) == ("retry_later", "acme", "default")  # type: ignore[attr-defined]
        assert (rec.attempt, rec.max_attempts) == (attempt, 3)  # type: ignore[attr-defined]
        assert isinstance(rec.duration_ms, int) and rec.duration_ms >= 0  # type: ignore[attr-defined]
        assert rec.levelno == logging.INFO
    assert retry.outcome == "failed" and retry.state == "retry_wait"  # type: ignore[attr-defined]
    assert retry.retry_in_ms == 300  # type: ignore[attr-defined]
    assert retry.error == "Retry: not yet"  # type: ignore[attr-defined]
    text = retry.getMessage()
    assert f"task retry_later {h.id} (tenant acme, queue default) attempt 1/3 failed in " in text
    assert text.endswith("; retry in 300ms")
    assert success.outcome == "succeeded" and success.state == "succeeded"  # type: ignore[attr-defined]
    assert " attempt 2/3 succeeded in " in success.getMessage()


def test_a_failure_to_the_dlq_says_so(
    app: App, start_worker: Callable[..., Worker], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    start_worker(concurrency=2)
    h = app.enqueue("permanent")  # Permanent: dead at once, retries=5 unused
    with pytest.raises(TaskFailed):
        h.result(timeout=30)
    [rec] = ended(caplog, h.id, 1)
    assert (rec.attempt, rec.max_attempts, rec.state) == (1, 6, "dead")  # type: ignore[attr-defined]
    assert rec.retry_in_ms is None  # type: ignore[attr-defined]
    assert rec.error == "Permanent: bad input, never retry"  # type: ignore[attr-defined]
    assert rec.getMessage().endswith("; dead-lettered")


def test_worker_banner_names_redis_without_its_password(
    app: App, start_worker: Callable[..., Worker], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=WORKER_LOG)
    assert app.broker  # connected with the real settings; only the banner sees the URL below
    app.settings = dataclasses.replace(app.settings, redis_url=SECRET_URL)
    w = start_worker(concurrency=1)
    banner = wait_for(
        lambda: next(
            (r for r in caplog.records if r.getMessage().startswith(f"worker {w.id}")), None
        ),
        "the worker's banner",
    )
    assert "redis://ops:***@redis.internal:6380/2" in banner.getMessage()
    assert "s3cret" not in caplog.text


def test_a_fire_gets_a_line_with_its_job_nominal_time_lag_and_run(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=BEAT_LOG)
    job = app.jobs.put(
        "hourly", tasks={"t": Task("noop")}, every="1h", tenant="acme", allow_unregistered=True
    )
    nominal = (server_ms(app) // 1000 - 5) * 1000  # downtime: 5 s overdue
    shard = app.jobs.get_by_id(job.id).shard
    k = app.broker.keys
    app.broker.client.hset(k.job(shard, job.id), "next_fire", nominal)
    app.broker.client.zadd(k.schedule(shard), {job.id: nominal})
    Beat(app, name="b1").tick()
    assert [r.id for r in runs_of(app, job.id)] == [f"{job.id}@{nominal}"]
    [rec] = [r for r in caplog.records if getattr(r, "job_id", None) == job.id]
    assert (rec.job, rec.tenant, rec.status) == ("hourly", "acme", "created")  # type: ignore[attr-defined]
    assert rec.fire_time == iso(from_ms(nominal))  # type: ignore[attr-defined]
    assert rec.run_id == f"{job.id}@{nominal}"  # type: ignore[attr-defined]
    assert rec.lag_ms >= 5000  # type: ignore[attr-defined]
    assert rec.getMessage().startswith(
        f"job hourly {job.id} (tenant acme) fire {iso(from_ms(nominal))} (every): created, "
        f"run {job.id}@{nominal}, lag "
    )


def test_beat_banner_names_redis_without_its_password(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=BEAT_LOG)
    assert app.broker
    app.settings = dataclasses.replace(app.settings, redis_url=SECRET_URL)
    beat = Beat(app, name="b-banner")
    t = threading.Thread(target=beat.run, daemon=True)
    t.start()
    try:
        banner = wait_for(
            lambda: next((r for r in caplog.records if "starting" in r.getMessage()), None),
            "the beat's banner",
        )
    finally:
        beat.stop()
        t.join(15)
    assert banner.getMessage().startswith("beat b-banner on redis://ops:***@redis.internal:6380/2")
    assert "s3cret" not in caplog.text
