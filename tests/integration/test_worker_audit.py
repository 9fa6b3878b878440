"""``redcron worker --audit``: the command-line worker records each attempt's
start and end of execution in the shard's audit stream (what ``redcron
chaos`` checks its invariants against)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import chaos_app  # tests/apps
import pytest
import redis
from polling import wait_for  # tests/helpers
from procs import stop
from worker_procs import thread_workers

from redcron import App
from redcron.keys import shard_of_id
from redcron.store.audit import AuditEntry, AuditLog

ROOT = Path(__file__).resolve().parents[2]


def test_the_worker_command_audits_attempts(redis_url: str, key_prefix: str) -> None:
    app = App(redis_url, prefix=key_prefix.rstrip(":"))
    chaos_app.register(app)
    handle = app.tasks["echo"].enqueue("hi")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests" / "apps")]),
        "REDCRON_PREFIX": app.settings.prefix,
        "REDCRON_REDIS_URL": redis_url,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "redcron.cli.main", "worker", "-A", "chaos_app:app",
         "--audit", "--redis", redis_url, "--loglevel", "warning"],
        env=env,
    )  # fmt: skip
    audit = AuditLog(app.broker)

    def entries() -> list[AuditEntry]:
        return [e for e in audit.read(shard_of_id(handle.id)) if e.iid == handle.id]

    try:
        wait_for(lambda: handle.state == "succeeded", "the task to succeed", timeout=30)
        events = wait_for(lambda: len(entries()) >= 2 and entries(), "start and end entries")
        assert [e.event for e in events] == ["start", "end"]
        assert events[0].epoch == events[1].epoch and events[1].outcome == "succeeded"
        assert events[0].worker == handle.info().attempts[0].worker
    finally:
        stop(proc)
        app.close()


def test_a_retried_audit_write_whose_first_send_landed_counts_once(
    redis_url: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An XADD can land while its reply is lost with the connection (Redis killed
    right after): the worker's retry lands it again.  Both copies carry the event's
    token, and the reader yields one: the chaos checker saw "attempt 1 started
    executing 2 times" on one worker from exactly this."""
    app = App(redis_url, prefix=key_prefix.rstrip(":"))
    chaos_app.register(app)
    real = AuditLog.record
    lost_replies: list[str] = []

    def landed_but_reply_lost(self: AuditLog, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        if not lost_replies:
            lost_replies.append(args[1])
            raise redis.ConnectionError("Connection closed by server.")

    monkeypatch.setattr(AuditLog, "record", landed_but_reply_lost)
    handle = app.tasks["echo"].enqueue("hi")
    with thread_workers(app, "audited") as start:
        start(audit=True)
        wait_for(lambda: handle.state == "succeeded", "the task to succeed", timeout=30)
    audit = AuditLog(app.broker)
    raw = app.broker.client.xlen(app.broker.keys.audit(shard_of_id(handle.id)))
    events = [e for e in audit.read(shard_of_id(handle.id)) if e.iid == handle.id]
    assert lost_replies == ["start"] and raw == 3  # the start landed twice
    assert [e.event for e in events] == ["start", "end"]
    app.close()
