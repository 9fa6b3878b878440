"""A notifier killed (SIGKILL, a real process) mid-delivery or between routing
an event and acknowledging it: the message arrives once or twice, never not at all."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from polling import wait_for  # tests/helpers
from procs import LoggedProc  # tests/helpers
from receiver import (  # tests/helpers
    Receiver,
    notify_app_fixture,  # noqa: F401 (the app fixture)
    rec_fixture,  # noqa: F401 (the rec fixture)
)
from server_time import server_ms  # tests/helpers

from redcron import App
from redcron.notify import Notifier
from redcron.notify.signing import DELIVERY_HEADER
from redcron.store import ChannelStore

CHILD = """
import os, sys
from redcron import App
from redcron.notify import Notifier
app = App(sys.argv[1], prefix=sys.argv[2], notify_allow_hosts="127.0.0.1")
n = Notifier(app, name="doomed", claim_idle_ms=0)
if sys.argv[3] == "die-before-ack":
    n.outbox.ack = lambda *a, **k: os._exit(9)
n.run()
"""


def child(app: App, mode: str, tmp_path: Path) -> LoggedProc:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    return LoggedProc(
        CHILD, [app.settings.redis_url, app.settings.prefix, mode], env, tmp_path / "notifier.log"
    )


def emit(app: App) -> None:
    app.broker.client.xadd(
        app.broker.keys.events(0),
        {
            "type": "run_failed",
            "tenant": "acme",
            "job": "0-j",
            "run": "0-j@1",
            "at": 1,
            "detail": "",
        },
    )


def after(app: App, rec: Receiver) -> list[str]:
    """Every delivery id received once a fresh notifier has run past every claim."""
    fresh = Notifier(app, claim_idle_ms=0)
    try:
        fresh.step(server_ms(app) + 600_000)
    finally:
        fresh.pool.shutdown(wait=True)
    return [r.headers[DELIVERY_HEADER] for r in rec.got]


def test_killed_while_sending_it_is_sent_again(app: App, rec: Receiver, tmp_path: Path) -> None:
    info, _ = ChannelStore(app.broker).add("acme", "webhook", rec.url)
    rec.hold.set()
    emit(app)
    proc = child(app, "run", tmp_path)
    try:
        wait_for(lambda: rec.got, "the doomed notifier's request")
        proc.sigkill()
    finally:
        proc.close()
    rec.hold.clear()
    rec.release.set()
    got = after(app, rec)
    assert len(got) == 2 and len(set(got)) == 1  # twice, the same delivery id
    assert ChannelStore(app.broker).pending(info.id) == 0


def test_killed_before_acknowledging_it_is_routed_again_and_sent_once(
    app: App, rec: Receiver, tmp_path: Path
) -> None:
    info, _ = ChannelStore(app.broker).add("acme", "webhook", rec.url)
    emit(app)
    proc = child(app, "die-before-ack", tmp_path)
    try:
        assert proc.proc.wait(60) == 9, proc.log()
    except subprocess.TimeoutExpired:
        pytest.fail(proc.log())
    finally:
        proc.close()
    assert rec.got == []  # it died after writing the outbox, before sending
    assert ChannelStore(app.broker).pending(info.id) == 1
    got = after(app, rec)
    assert len(got) == 1
    assert ChannelStore(app.broker).pending(info.id) == 0
