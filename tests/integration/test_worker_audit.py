"""``redcron worker --audit``: the command-line worker records each attempt's
start and end of execution in the shard's audit stream (what ``redcron
chaos`` checks its invariants against)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import chaos_app  # tests/apps
from polling import wait_for  # tests/helpers
from procs import stop

from redcron import App
from redcron.broker.audit import AuditEntry, AuditLog
from redcron.keys import shard_of_id

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
