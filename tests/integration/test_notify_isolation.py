"""One tenant's receivers cannot hold another tenant's notifications: the
threads one owner's channels take are bounded, and whatever a receiver
answers is one failed, backed-off attempt that leaves the rest of its batch
to go on (real Redis, real receivers on 127.0.0.1)."""

from __future__ import annotations

import threading

import pytest
from polling import wait_for  # tests/helpers
from receiver import (  # tests/helpers
    notify_app_fixture,  # noqa: F401 (the app fixture)
    receiver,
)

from redcron import App
from redcron.notify import Notifier
from redcron.notify.notifier import tenant_threads_for
from redcron.store import ChannelStore, Outbox


@pytest.fixture
def channels(app: App) -> ChannelStore:
    return ChannelStore(app.broker)


def run_in_thread(notifier: Notifier) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    loop = threading.Thread(target=notifier.run, args=(stop,), daemon=True)
    loop.start()
    return stop, loop


def test_a_tenant_with_many_hanging_channels_holds_at_most_its_share_of_threads(
    app: App, channels: ChannelStore
) -> None:
    """Ten channels of one tenant whose receiver hangs, on a pool of 4: before,
    all 4 threads waited on them and another tenant's test message waited too."""
    with receiver() as hog, receiver() as other:
        hog.hold.set()
        hogs = [channels.add("hog", "webhook", hog.url, timeout_s=30)[0] for _ in range(10)]
        victim, _secret = channels.add("victim", "webhook", other.url)
        notifier = Notifier(app, threads=4, claim_idle_ms=0)
        assert notifier.tenant_threads == 1
        for info in hogs:
            channels.send_test(info.id)
        stop, loop = run_in_thread(notifier)
        try:
            wait_for(lambda: hog.got, "a hog channel to be sent")
            channels.send_test(victim.id)
            wait_for(lambda: other.got, "the other tenant's test, while the hog still hangs")
            assert not hog.release.is_set()
            assert len(hog.got) == 1  # its one thread, hanging; its others wait their turn
        finally:
            hog.release.set()
            stop.set()
            loop.join(60)
        assert not loop.is_alive()


def test_step_keeps_the_same_bound_and_sends_every_channel(
    app: App, channels: ChannelStore
) -> None:
    with receiver() as rec:
        ids = [channels.add("acme", "webhook", rec.url)[0].id for _ in range(5)]
        ids.append(channels.add(None, "webhook", rec.url)[0].id)
        for cid in ids:
            channels.send_test(cid)
        notifier = Notifier(app, threads=4, tenant_threads=2)
        try:
            assert notifier.step() == 6
        finally:
            notifier.pool.shutdown(wait=True)
        assert len(rec.got) == 6 and all(channels.pending(cid) == 0 for cid in ids)


def test_the_share_is_a_quarter_of_the_pool_unless_given() -> None:
    assert [tenant_threads_for(n, None) for n in (1, 4, 8, 32)] == [1, 1, 2, 8]
    assert tenant_threads_for(8, 3) == 3 and tenant_threads_for(8, 99) == 8
    assert tenant_threads_for(8, 0) == 1


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"garbage\r\n\r\n", id="no-http"),
        pytest.param(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(101))
                     + b"\r\n", id="101-headers"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",
                     id="100KB-header-line"),
    ],
)  # fmt: skip
def test_a_reply_that_is_no_http_is_a_failed_delivery_and_the_batch_goes_on(
    app: App, channels: ChannelStore, raw: bytes
) -> None:
    """Before, http.client's exception escaped the send: nothing was logged or
    backed off, and the deliveries claimed with it waited out their claim."""
    with receiver() as rec:
        rec.raw = raw
        info, _secret = channels.add("acme", "webhook", rec.url)
        now = app.broker.server_ms()
        for i in range(3):
            Outbox(app.broker).enqueue(info.id, f"d{i}", {"type": "test", "text": "t"}, now)
        notifier = Notifier(app)
        try:
            assert notifier.step(now) == 3
        finally:
            notifier.pool.shutdown(wait=True)
        assert len(rec.got) == 3  # all three were tried in the one pass
        log = channels.deliveries(info.id)
        assert [d.outcome for d in log] == ["failed"] * 3
        assert all(d.status is None and d.error for d in log)
        assert channels.pending(info.id) == 3  # kept, to retry
        due: list[tuple[bytes, float]] = app.broker.client.zrange(
            app.broker.keys.outbox(info.id), 0, -1, withscores=True
        )
        # backed off (1-2 s for a first failure), not left claimed (timeout + 30 s)
        assert all(now < score < now + 30_000 for _id, score in due)
