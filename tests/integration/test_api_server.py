"""``redcron dashboard`` serves the API with waitress and says where it listens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def test_dashboard_command_serves_the_api(redis_url: str, key_prefix: str) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "REDCRON_PREFIX": key_prefix.rstrip(":"),
        "REDCRON_ADMIN_TOKEN": "server-admin-token",
    }
    with subprocess.Popen(
        [sys.executable, "-m", "redcron.cli.main", "dashboard", "--port", "0",
         "--redis", redis_url],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("redcron dashboard listening on http://127.0.0.1:"), line
            base = line.split()[4].rstrip("/")
            with urllib.request.urlopen(f"{base}/v1/openapi.json", timeout=10) as resp:
                assert resp.headers["Server"].startswith("waitress")
                assert json.load(resp)["openapi"].startswith("3.1")
            with pytest.raises(urllib.error.HTTPError) as denied:
                urllib.request.urlopen(f"{base}/v1/jobs", timeout=10)
            assert denied.value.code == 401
            denied.value.close()
            request = urllib.request.Request(
                f"{base}/v1/jobs", headers={"Authorization": "Bearer server-admin-token"}
            )
            with urllib.request.urlopen(request, timeout=10) as resp:
                assert json.load(resp) == {"jobs": []}
        finally:
            proc.terminate()
            proc.wait(10)
