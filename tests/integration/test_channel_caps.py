"""The channel caps hold under concurrent creates: the count and the write are
one script (``lua/channel_add.lua``), so 30 creates at once cannot all pass
one count (real Redis, threads)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from receiver import notify_app_fixture  # noqa: F401 (the app fixture), tests/helpers

from redcron import App
from redcron.errors import Conflict
from redcron.store import ChannelStore
from redcron.store import channels as channels_module
from redcron.store.channels import MAX_TENANT_CHANNELS

URL = "http://127.0.0.1:9/hook"


def add_at_once(store: ChannelStore, tenant: str | None, n: int) -> list[str]:
    """``n`` adds released together; the outcome of each ("ok", or "full": refused for a cap)."""
    gate = threading.Barrier(n)

    def one(_i: int) -> str:
        gate.wait(30)
        try:
            store.add(tenant, "webhook", URL)
        except Conflict:
            return "full"
        return "ok"

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_thirty_concurrent_creates_leave_a_tenant_at_exactly_its_cap(app: App) -> None:
    store = ChannelStore(app.broker)
    got = add_at_once(store, "acme", 30)
    assert got.count("ok") == MAX_TENANT_CHANNELS == 20
    assert got.count("full") == 10
    assert len(store.list("acme")) == 20
    # a refused add leaves no hash behind: every channel key is an indexed one's
    keys = {k.decode() for k in app.broker.client.scan_iter(match=f"{app.broker.keys.prefix}:{{c*")}
    assert keys == {app.broker.keys.channel(c.id) for c in store.list("acme")}
    # another tenant and the admin are not held by acme's cap
    store.add("globex", "webhook", URL)
    store.add(None, "webhook", URL)


def test_concurrent_creates_keep_the_deployment_cap(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(channels_module, "MAX_CHANNELS", 25)
    store = ChannelStore(app.broker)
    store.add("acme", "webhook", URL)
    got = add_at_once(store, None, 30)  # the admin's: no tenant cap, only the deployment's
    assert got.count("ok") == 24 and len(store.list()) == 25
    with pytest.raises(Conflict, match=r"most channels \(25\)"):
        store.add("globex", "webhook", URL)
