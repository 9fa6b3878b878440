"""``redcron dashboard`` serves the API with waitress and says where it listens."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from dashboard_proc import dashboard, dashboard_process  # tests/helpers


def test_dashboard_command_serves_the_api(redis_url: str, key_prefix: str) -> None:
    with dashboard(redis_url, key_prefix, REDCRON_ADMIN_TOKEN="server-admin-token") as base:
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
            assert json.load(resp) == {"jobs": [], "next_cursor": None}


def test_dashboard_exits_0_after_an_orderly_stop_on_sigterm(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    """Workers and beats exit 0 on SIGTERM; the dashboard was killed by it (-15),
    mid-request, and a service manager counted every stop as a failure."""
    log = tmp_path / "dashboard.log"
    with dashboard_process(redis_url, key_prefix, log) as (base, proc):
        with urllib.request.urlopen(f"{base}/v1/openapi.json", timeout=10) as resp:
            assert resp.status == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert "redcron dashboard stopped" in log.read_text()
