"""``GET /v1/openapi.json`` tells the truth: schemathesis (``st run``, every check)
against a live ``redcron dashboard`` with the admin token finds no status the
document does not declare, no reply off its schema, no valid request refused
and no invalid one accepted, and no 500.

Bounded: a fixed seed, few examples per operation, the coverage, fuzzing and
stateful phases (the stateful one follows the document's links from a seeded
job, run and dead task); ~35 s.  Settings: ``schemathesis.toml`` beside this
file (its one allowance: a 400 on the job and task bodies for what the document
cannot state, listed there); hooks: ``tests/helpers/schemathesis_hooks.py`` (a
lease's long poll shortened, a memory total no pattern can bound let through).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from dashboard_proc import dashboard  # tests/helpers

HERE = Path(__file__).resolve().parent
HELPERS = HERE.parent / "helpers"
CONFIG = HERE / "schemathesis.toml"
ADMIN = "schemathesis-admin-token"
ST = Path(sys.executable).parent / "st"


def _call(base: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.load(resp)


def _seed(base: str) -> None:
    """A job with a run, and a dead task, so the stateful phase's links reach
    runs, tasks and the DLQ (a random id only finds 404s)."""
    ping = "openapi_app.ping"
    job = _call(base, "POST", "/v1/jobs",
                {"name": "seeded", "cron": "0 2 * * *", "tasks": {"p": {"ref": ping}}})  # fmt: skip
    _call(base, "POST", f"/v1/jobs/{job['id']}/trigger")
    _call(base, "POST", "/v1/tasks", {"name": ping, "queue": "dead-end", "retries": 0})
    (lease,) = _call(base, "POST", "/v1/worker/lease",
                     {"worker_id": "seeder", "queues": ["dead-end"]})  # fmt: skip
    _call(base, "POST", "/v1/worker/fail", {"lease_id": lease["lease_id"], "retryable": False})
    assert _call(base, "GET", "/v1/dlq")["entries"]


@pytest.mark.slow  # ~35 s idle, more on a loaded 2-core machine: ~4,000 requests
@pytest.mark.timeout(300)
def test_schemathesis_finds_the_document_true(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    with dashboard(
        redis_url,
        key_prefix,
        args=("-A", "openapi_app:app"),
        REDCRON_ADMIN_TOKEN=ADMIN,
        # channels to loopback may be added: the document's URL pattern is this list's
        REDCRON_NOTIFY_ALLOW_HOSTS="127.0.0.1",
    ) as base:
        _seed(base)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HELPERS), os.environ.get("PYTHONPATH", "")]),
            "REDCRON_SCHEMATHESIS_TOKEN": ADMIN,
        }
        done = subprocess.run(
            [str(ST), "--config-file", str(CONFIG), "run", f"{base}/v1/openapi.json",
             "--checks", "all", "--phases", "coverage,fuzzing,stateful",
             "--seed", "1", "--workers", "1", "--no-color",
             "--report", "junit", "--report-dir", str(tmp_path)],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-30_000:]
    assert " passed" in out and "failures" not in out.lower(), out[-30_000:]
