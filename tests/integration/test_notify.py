"""Notifications end to end on a real Redis and a webhook receiver on 127.0.0.1:
signatures, retries, the dead-letter digest, routing by tenant, sealed secrets,
scheme and host refusal, and a slow receiver that holds up only its own channel."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Mapping

import pytest
import redis
from followups import follow  # tests/helpers
from polling import wait_for  # tests/helpers
from receiver import (  # tests/helpers
    Receiver,
    rec_fixture,  # noqa: F401 (the rec fixture)
    receiver,
)
from server_time import server_ms  # tests/helpers

from redcron import App
from redcron.engine import FailItem
from redcron.errors import ValidationError
from redcron.keys import NOTIFY_GROUP
from redcron.model.jobs import Task
from redcron.notify import Notifier, Response, verify
from redcron.notify.signing import DELIVERY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER
from redcron.store import ChannelStore


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(
        redis_url,
        prefix=key_prefix.rstrip(":"),
        notify_allow_hosts="127.0.0.1",
        dashboard_url="https://rc.example/",
    )

    @a.task(name="n.t", retries=0)
    def t() -> None: ...

    yield a
    a.close()


@pytest.fixture
def notifier(app: App) -> Iterator[Notifier]:
    n = Notifier(app, claim_idle_ms=0)
    yield n
    n.pool.shutdown(wait=True)


def emit(
    app: App, kind: str, tenant: str, job: str = "0-job", run: str = "", detail: str = ""
) -> None:
    """An event as a producer (a script) writes it."""
    app.broker.client.xadd(
        app.broker.keys.events(0),
        {"type": kind, "tenant": tenant, "job": job, "run": run, "at": server_ms(app),
         "detail": detail},
    )  # fmt: skip


def outcomes(app: App, channel_id: str) -> list[str]:
    return [d.outcome for d in ChannelStore(app.broker).deliveries(channel_id)]


def test_a_webhook_is_signed_and_names_tenant_job_run_and_a_link(
    app: App, rec: Receiver, notifier: Notifier
) -> None:
    channels = ChannelStore(app.broker)
    info, secret = channels.add("acme", "webhook", rec.url)
    assert secret and info.tenant == "acme" and info.url == rec.url
    emit(app, "run_failed", "acme", "0-j1", "0-j1@5", "1 of 1 task(s) failed")
    now = server_ms(app)
    assert notifier.step(now) == 1
    [got] = rec.got
    ts = got.headers[TIMESTAMP_HEADER]
    assert verify(secret, got.body, got.headers[SIGNATURE_HEADER], ts, now / 1000)
    assert not verify(secret, got.body + b" ", got.headers[SIGNATURE_HEADER], ts, now / 1000)
    assert not verify("whsec_other", got.body, got.headers[SIGNATURE_HEADER], ts, now / 1000)
    assert not verify(secret, got.body, got.headers[SIGNATURE_HEADER], ts, now / 1000 + 3600)
    body = got.json()
    assert body["delivery"] == got.headers[DELIVERY_HEADER]
    assert (body["type"], body["tenant"], body["job"], body["run"]) == (
        "run_failed", "acme", "0-j1", "0-j1@5",
    )  # fmt: skip
    assert body["link"] == "https://rc.example/runs/0-j1@5"
    assert outcomes(app, info.id) == ["delivered"]
    assert channels.pending(info.id) == 0
    # the event is acknowledged: a second pass sends nothing
    assert notifier.step(now + 1) == 0 and len(rec.got) == 1


def test_a_500_is_retried_with_backoff_then_delivered_once(
    app: App, rec: Receiver, notifier: Notifier
) -> None:
    info, _ = ChannelStore(app.broker).add(None, "webhook", rec.url)
    rec.statuses = [500]
    emit(app, "breaker_opened", "acme", detail="4 of 4 attempts failed")
    now = server_ms(app)
    notifier.step(now)
    assert len(rec.got) == 1 and outcomes(app, info.id) == ["failed"]
    notifier.step(now + 500)  # the first retry waits at least a second
    assert len(rec.got) == 1
    notifier.step(now + 3_600_000)
    assert len(rec.got) == 2 and outcomes(app, info.id) == ["delivered", "failed"]
    first, second = rec.got
    assert first.headers[DELIVERY_HEADER] == second.headers[DELIVERY_HEADER]
    notifier.step(now + 7_200_000)
    assert len(rec.got) == 2


def test_a_receiver_that_is_down_delays_and_never_drops(app: App, notifier: Notifier) -> None:
    with receiver() as rec:
        url = rec.url
    channels = ChannelStore(app.broker)
    info, _ = channels.add("acme", "webhook", url)
    emit(app, "run_failed", "acme", run="0-j@1")
    now = server_ms(app)
    for i in range(4):
        notifier.step(now + i * 3_600_000)
    assert channels.pending(info.id) == 1
    assert outcomes(app, info.id) == ["failed"] * 4
    # past the stated retention it is given up, and the log says so
    notifier.step(now + 4 * 86_400_000)
    assert channels.pending(info.id) == 0 and outcomes(app, info.id)[0] == "expired"


def test_dead_letters_come_as_one_digest_a_minute_per_channel(
    app: App, rec: Receiver, notifier: Notifier
) -> None:
    ChannelStore(app.broker).add("acme", "slack", rec.url)
    for i in range(50):
        detail = json.dumps({"task": f"0-t{i}", "name": "n.t", "error": f"boom {i}"})
        emit(app, "dead_lettered", "acme", "0-jobA" if i % 5 else "0-jobB", detail=detail)
    now = server_ms(app)
    notifier.step(now)
    [got] = rec.got
    text = got.json()["text"]
    assert set(got.json()) == {"text"}  # Slack's incoming-webhook payload
    assert "50 task(s) dead-lettered" in text and "acme 0-jobA: 40" in text
    assert "boom 0" in text
    for i in range(10):
        emit(app, "dead_lettered", "acme", "0-jobA", detail=json.dumps({"error": f"late {i}"}))
    notifier.step(now + 10_000)
    assert len(rec.got) == 1  # within the minute: gathered, not sent
    notifier.step(now + 61_000)
    assert len(rec.got) == 2 and "10 task(s) dead-lettered" in rec.got[1].json()["text"]


def test_a_webhook_digest_carries_counts_and_the_first_errors(
    app: App, rec: Receiver, notifier: Notifier
) -> None:
    ChannelStore(app.broker).add("acme", "webhook", rec.url, events=["dead_lettered"])
    for i in range(12):
        emit(app, "dead_lettered", "acme", "0-jobA", detail=json.dumps({"error": f"e{i}"}))
    notifier.step(server_ms(app))
    [got] = rec.got
    body = got.json()
    assert body["count"] == 12 and body["by_job"] == [
        {"tenant": "acme", "job": "0-jobA", "count": 12}
    ]
    assert [e["error"] for e in body["first_errors"]] == ["e0", "e1", "e2", "e3", "e4"]
    assert body["link"] == "https://rc.example/tenants/acme/dlq"


def test_a_tenant_channel_takes_its_own_tenant_and_the_admin_channel_every_one(
    app: App, notifier: Notifier
) -> None:
    with receiver() as mine, receiver() as admin:
        channels = ChannelStore(app.broker)
        channels.add("acme", "webhook", mine.url)
        channels.add(None, "webhook", admin.url, events=["run_failed"])
        emit(app, "run_failed", "acme", run="0-a@1")
        emit(app, "run_failed", "other", run="0-b@1")
        emit(app, "trigger_lag", "acme", detail="fired 40 s late")
        notifier.step(server_ms(app))
        assert sorted(r.json()["run"] for r in admin.got) == ["0-a@1", "0-b@1"]
        assert sorted(r.json()["type"] for r in mine.got) == ["run_failed", "trigger_lag"]
        assert all(r.json()["tenant"] == "acme" for r in mine.got)


def test_the_secret_and_url_are_sealed_in_redis(app: App, rec: Receiver) -> None:
    channels = ChannelStore(app.broker)
    info, secret = channels.add("acme", "slack", rec.url + "/T000/B000/XXXXSECRET")
    assert secret is None  # Slack signs nothing: its URL is the credential
    info, secret = channels.add("acme", "webhook", rec.url + "?token=abc")
    assert secret is not None
    raw = json.dumps({k.decode(): v.decode() for k, v in app.broker.client.hgetall(
        app.broker.keys.channel(info.id)).items()})  # fmt: skip
    assert secret not in raw and "token=abc" not in raw
    assert info.url == rec.url  # shown without its query
    assert all("XXXXSECRET" not in c.url for c in channels.list())
    assert channels.credentials(info.id) == (rec.url + "?token=abc", secret)


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://127.0.0.1:70/", "javascript:x",
            "127.0.0.1/hook", "http://user:pw@127.0.0.1/", "http://10.0.0.1/hook",
            "http://localhost/hook", "http://127.0.0.1:notaport/"],
)  # fmt: skip
def test_other_schemes_and_hosts_off_the_allowlist_are_refused(app: App, url: str) -> None:
    with pytest.raises(ValidationError) as got:
        ChannelStore(app.broker).add("acme", "webhook", url)
    assert got.value.field == "url"
    assert ChannelStore(app.broker).list() == []


def test_with_no_allowlist_no_channel_can_be_made(redis_url: str, key_prefix: str) -> None:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), notify_allow_hosts="")
    with pytest.raises(ValidationError, match="REDCRON_NOTIFY_ALLOW_HOSTS"):
        ChannelStore(a.broker).add("acme", "webhook", "http://127.0.0.1/hook")
    a.close()


def test_a_slow_receiver_holds_up_only_its_own_channel(app: App, notifier: Notifier) -> None:
    with receiver() as slow, receiver() as fast:
        channels = ChannelStore(app.broker)
        channels.add("slowco", "webhook", slow.url, timeout_s=30)
        channels.add("fastco", "webhook", fast.url)
        slow.hold.set()
        emit(app, "run_failed", "slowco", run="0-s@1")
        stop = threading.Event()
        loop = threading.Thread(target=notifier.run, args=(stop,), daemon=True)
        loop.start()
        try:
            wait_for(lambda: slow.got, "the slow receiver to be reached")
            emit(app, "run_failed", "fastco", run="0-f@1")
            wait_for(lambda: fast.got, "the fast receiver, while the slow one still holds")
            assert not slow.release.is_set()
        finally:
            slow.release.set()
            stop.set()
            loop.join(30)


def test_the_scripts_record_dead_letters_failed_runs_and_breakers_with_their_tenant(
    app: App, rec: Receiver, notifier: Notifier
) -> None:
    info, _ = ChannelStore(app.broker).add("default", "webhook", rec.url)
    app.jobs.put("flaky", tasks={"t": Task("n.t")}, overlap="allow",
                 breaker_threshold=0.5, breaker_min_attempts=2)  # fmt: skip
    runs = [app.jobs.trigger("flaky") for _ in range(2)]
    leases = app.broker.leases.lease(0, "w", 10, 600_000, ["default"])
    app.broker.leases.fail(
        0, "w", [FailItem(x.iid, x.epoch, "failed", "boom", False) for x in leases]
    )
    follow(app)  # the events are follow-ups of the ends
    events = app.jobs.events()
    assert {e.type for e in events} >= {"dead_lettered", "run_failed", "breaker_opened"}
    assert all(e.tenant == "default" for e in events)
    assert {e.run_id for e in events if e.type == "run_failed"} == set(runs)
    notifier.step(server_ms(app))
    kinds = sorted(r.json()["type"] for r in rec.got)
    assert kinds == ["breaker_opened", "dead_lettered", "run_failed", "run_failed"]
    digest = next(r.json() for r in rec.got if r.json()["type"] == "dead_lettered")
    assert digest["count"] == 2 and digest["first_errors"][0]["error"] == "boom"
    assert outcomes(app, info.id).count("delivered") == 4


def test_events_from_before_any_channel_are_not_sent(
    app: App, rec: Receiver, notifier: Notifier
) -> None:
    emit(app, "run_failed", "acme", run="0-old@1")
    ChannelStore(app.broker).add("acme", "webhook", rec.url)
    info = app.broker.client.xinfo_groups(app.broker.keys.events(0))
    assert [g["name"].decode() for g in info] == [NOTIFY_GROUP]
    emit(app, "run_failed", "acme", run="0-new@1")
    notifier.step(server_ms(app))
    assert [r.json()["run"] for r in rec.got] == ["0-new@1"]


def test_a_channel_removed_while_sending_leaves_no_keys(app: App) -> None:
    channels = ChannelStore(app.broker)
    info, _ = channels.add("acme", "webhook", "http://127.0.0.1:9/hook")

    class Removing:
        def post(
            self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
        ) -> Response:
            channels.remove(info.id)
            return Response(500, "HTTP 500")

    n = Notifier(app, sender=Removing())
    try:
        emit(app, "run_failed", "acme", run="0-j@1")
        n.step(server_ms(app))
    finally:
        n.pool.shutdown(wait=True)
    assert list(app.broker.client.scan_iter(match=f"{app.settings.prefix}:{{c*")) == []


def test_a_pass_redis_fails_is_retried_not_fatal(
    app: App, rec: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    ChannelStore(app.broker).add("acme", "webhook", rec.url)
    n = Notifier(app)
    real = n._pass
    failures = [redis.ConnectionError("Redis is loading"), redis.TimeoutError("slow")]

    def flaky() -> int:
        if failures:
            raise failures.pop(0)
        return real()

    monkeypatch.setattr(n, "_pass", flaky)
    monkeypatch.setattr("redcron.notify.notifier.OUTAGE_S", 0.01)
    emit(app, "run_failed", "acme", run="0-j@1")
    stop = threading.Event()
    loop = threading.Thread(target=n.run, args=(stop,), daemon=True)
    loop.start()
    try:
        wait_for(lambda: rec.got, "the delivery after two failed passes")
    finally:
        stop.set()
        loop.join(30)
    assert not failures and not loop.is_alive()


def test_no_secret_or_url_reaches_the_log(
    app: App, rec: Receiver, notifier: Notifier, caplog: pytest.LogCaptureFixture
) -> None:
    channels = ChannelStore(app.broker)
    slack, _ = channels.add("acme", "slack", rec.url + "/T0/B0/SLACKSECRET")
    hook, secret = channels.add("acme", "webhook", rec.url + "?token=HOOKSECRET")
    assert secret is not None
    rec.statuses = [500]
    emit(app, "run_failed", "acme", run="0-j@1")
    with caplog.at_level(logging.DEBUG):
        now = server_ms(app)
        notifier.step(now)
        notifier.step(now + 3_600_000)
    assert len(rec.got) == 3 and "delivered" in caplog.text and "failed" in caplog.text
    for word in ("SLACKSECRET", "HOOKSECRET", secret):
        assert word not in caplog.text
        assert all(word not in str(channels.deliveries(c.id)) for c in (slack, hook))


def test_a_channel_removed_while_routing_gets_nothing_written(app: App, notifier: Notifier) -> None:
    channels = ChannelStore(app.broker)
    hook, _ = channels.add("acme", "webhook", "http://127.0.0.1:9/hook")
    slack, _ = channels.add("acme", "slack", "http://127.0.0.1:9/slack")
    notifier.refresh()  # the pass has read both channels...
    channels.remove(hook.id)
    channels.remove(slack.id)  # ...then they go
    emit(app, "run_failed", "acme", run="0-j@1")
    emit(app, "dead_lettered", "acme", detail="{}")
    assert notifier.route(server_ms(app)) == 2
    assert list(app.broker.client.scan_iter(match=f"{app.settings.prefix}:{{c*")) == []
