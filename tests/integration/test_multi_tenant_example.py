"""``python examples/multi_tenant.py --live`` on a real Redis: the tenants it sets
(weights, the backfill's cap) and the work it queues, as ``redcron tenants
list`` and the dashboard's Tenants page read them.  The fairness itself is
asserted, with exact counts, on the testing mode (tests/testing/test_examples.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from redcron import App

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multi_tenant.py"


def test_the_live_mode_sets_the_tenants_and_queues_their_work(
    redis_url: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # App() finds Redis as with make run going (here: through the environment)
    monkeypatch.setenv("REDCRON_REDIS_URL", redis_url)
    monkeypatch.setenv("REDCRON_PREFIX", key_prefix.rstrip(":"))
    spec = importlib.util.spec_from_file_location("multi_tenant_live", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    module.live()
    app = App(redis_url, prefix=key_prefix.rstrip(":"))
    try:
        rows = {row.tenant: row for row in app.tenants.list()}
        for tenant, (weight, cap, n) in module.TENANTS.items():
            assert rows[tenant].settings.weight == weight
            assert rows[tenant].settings.max_in_flight == cap
            assert rows[tenant].queued == n
    finally:
        app.close()
