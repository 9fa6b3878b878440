"""Tenant settings against a real Redis: TenantStore and ``redcron tenants``.

Settings share the tenant hash with the lease script's dispatch state, so
every write here is checked to leave the other fields alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from cli_fixtures import Invoke, invoke_fixture  # noqa: F401 (fixtures)
from click.testing import Result

from redcron import App
from redcron.engine import FailItem
from redcron.errors import ValidationError
from redcron.keys import shard_of
from redcron.model.tenants import SETTINGS_FIELDS, TenantSettings
from redcron.store.tenants import TenantStore

SHARDS = 4


def two_tenants_on_different_shards() -> tuple[str, str]:
    a = "acme"
    b = next(f"beta{i}" for i in range(100) if shard_of(f"beta{i}", SHARDS) != shard_of(a, SHARDS))
    return a, b


@pytest.fixture
def prefix(key_prefix: str, monkeypatch: pytest.MonkeyPatch) -> str:
    p = key_prefix.rstrip(":")
    monkeypatch.setenv("REDCRON_PREFIX", p)
    monkeypatch.setenv("REDCRON_SHARDS", str(SHARDS))
    monkeypatch.delenv("REDCRON_REDIS_URL", raising=False)
    return p


@pytest.fixture
def app(redis_url: str, prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=prefix, shards=SHARDS)

    @a.task(name="t.noop", retries=0)
    def noop(x: int) -> int:
        return x

    a.broker.ensure_meta(check_policy=False)
    yield a
    a.close()


@pytest.fixture
def store(app: App) -> TenantStore:
    return TenantStore(app.broker)


def tenant_hash(store: TenantStore, r: redis.Redis, tenant: str) -> dict[str, str]:
    raw: dict[bytes, bytes] = r.hgetall(store.keys.tenant(store.shard(tenant), tenant))  # type: ignore[assignment]
    return {k.decode(): v.decode() for k, v in raw.items()}


def server_minute(r: redis.Redis) -> int:
    secs, micros = r.time()
    return (int(secs) * 1000 + int(micros) // 1000) // 60_000


def with_stable_minute(r: redis.Redis, check: Callable[[int], Any]) -> Any:
    """Run ``check(minute)``; again if the server minute rolled over meanwhile."""
    for _ in range(3):
        before = server_minute(r)
        result = check(before)
        if server_minute(r) == before:
            return result
    raise AssertionError("server minute kept rolling over")


# -- TenantStore ----------------------------------------------------------------


def test_get_of_a_tenant_never_set_is_the_defaults(store: TenantStore) -> None:
    assert store.get("nobody") == TenantSettings()


def test_set_writes_only_the_given_fields_and_registers_the_tenant(
    store: TenantStore, r: redis.Redis
) -> None:
    s = store.set("acme", weight=4, max_in_flight=50, rate="20/s")
    assert s == TenantSettings(weight=4, max_in_flight=50, rate=20.0)
    assert store.get("acme") == s
    assert tenant_hash(store, r, "acme") == {"weight": "4", "max_in_flight": "50", "rate": "20"}
    shard = store.shard("acme")
    assert r.zrange(store.keys.tenants(shard), 0, -1) == [b"acme"]

    s2 = store.set("acme", max_queued=1000, max_priority="normal", jitter_s=2.5, burst=40)
    assert s2 == TenantSettings(4, 50, 20.0, 40, 1000, "normal", 2.5)
    assert store.get("acme") == s2
    s3 = store.set("acme", allow_commands=True)
    assert s3 == TenantSettings(4, 50, 20.0, 40, 1000, "normal", 2.5, allow_commands=True)
    assert store.get("acme") == s3
    assert tenant_hash(store, r, "acme")["allow_commands"] == "1"  # what the scripts compare
    assert set(tenant_hash(store, r, "acme")) == set(SETTINGS_FIELDS)


def test_set_and_reset_never_touch_dispatch_state(store: TenantStore, r: redis.Redis) -> None:
    key = store.keys.tenant(store.shard("acme"), "acme")
    lease_state: dict[Any, Any] = {"d:default:normal": "17", "v:default:normal": "1", "tokens": "3",
                   "tokens_ts": "1700000000000"}  # fmt: skip
    r.hset(key, mapping=lease_state)
    store.set("acme", weight=2)
    store.set("acme", rate=0.5, max_in_flight=3)
    assert tenant_hash(store, r, "acme") == {
        **lease_state, "weight": "2", "rate": "0.5", "max_in_flight": "3",
    }  # fmt: skip
    assert store.reset("acme") == TenantSettings()
    assert tenant_hash(store, r, "acme") == lease_state
    assert store.get("acme") == TenantSettings()


def test_set_validates_the_merged_settings_and_writes_nothing_on_error(
    store: TenantStore, r: redis.Redis
) -> None:
    store.set("acme", weight=3)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"weight": 0}, "weight"),
        ({"max_in_flight": -1}, "max_in_flight"),
        ({"rate": "fast"}, "rate"),
        ({"max_priority": "urgent"}, "max_priority"),
        ({"colour": "red"}, "colour"),
    ]
    for bad, field in cases:
        with pytest.raises(ValidationError) as info:
            store.set("acme", max_queued=5, **bad)
        assert info.value.field == field
    assert tenant_hash(store, r, "acme") == {"weight": "3"}
    with pytest.raises(ValidationError, match=r"^tenant: "):
        store.set("bad name", weight=1)
    with pytest.raises(ValidationError, match=r"^tenant: "):
        store.get("a:b")


def test_list_shows_live_in_flight_and_queued_per_tenant(app: App, store: TenantStore) -> None:
    a, b = two_tenants_on_different_shards()
    noop = app.tasks["t.noop"]
    noop.enqueue_many([(i,) for i in range(3)], _tenant=a)
    noop.enqueue(9, _tenant=a, _priority="high", _queue="gpu")
    noop.enqueue(8, _tenant=a, _priority="low")
    noop.enqueue_many([(i,) for i in range(2)], _tenant=b)
    store.set(b, weight=2, max_in_flight=1)
    store.set("idle", rate="5/h")

    rows = {row.tenant: row for row in store.list()}
    assert set(rows) == {a, b, "idle"}
    assert (rows[a].queued, rows[a].in_flight) == (5, 0)
    assert (rows[b].queued, rows[b].in_flight) == (2, 0)
    assert (rows["idle"].queued, rows["idle"].in_flight) == (0, 0)
    assert rows[b].settings.weight == 2 and rows[b].settings.max_in_flight == 1
    assert rows["idle"].settings.rate == pytest.approx(5 / 3600)
    assert rows[a].shard == shard_of(a, SHARDS)

    leased = app.broker.leases.lease(store.shard(a), "w-1", 2, 30_000, ["default", "gpu"])
    assert [lease.tenant for lease in leased] == [a, a]
    rows = {row.tenant: row for row in store.list()}
    assert (rows[a].queued, rows[a].in_flight) == (3, 2)
    assert (rows[b].queued, rows[b].in_flight) == (2, 0)
    assert store.show(a) == rows[a]


def dispatched(counts: dict[str, int]) -> dict[str, int]:
    """A minute hash's dispatch fields as lease.lua writes them: each tenant's
    count and the minute's total."""
    return {
        **{f"dispatched:{t}": n for t, n in counts.items()},
        "dispatched:*": sum(counts.values()),
    }


def test_share_of_dispatch_comes_from_the_last_two_minutes(
    app: App, store: TenantStore, r: redis.Redis
) -> None:
    a, b = two_tenants_on_different_shards()
    for t in (a, b, "quiet"):
        store.set(t, weight=1)

    def check(minute: int) -> dict[str, Any]:
        for shard in range(SHARDS):
            for m in range(minute - 3, minute + 1):
                r.delete(store.keys.minute(shard, m))
        sa, sb = store.shard(a), store.shard(b)
        r.hset(store.keys.minute(sa, minute), mapping=dispatched({a: 30}))
        r.hset(store.keys.minute(sa, minute - 1), mapping=dispatched({a: 30}))
        r.hset(store.keys.minute(sb, minute), mapping=dispatched({b: 40}))
        r.hset(store.keys.minute(sa, minute - 2), mapping=dispatched({a: 1000}))  # too old
        return {row.tenant: row for row in store.list()}

    rows = with_stable_minute(r, check)
    assert rows[a].dispatched_last_minute == 60
    assert rows[a].share_last_minute == pytest.approx(0.6)
    assert rows[b].share_last_minute == pytest.approx(0.4)
    assert rows["quiet"].share_last_minute == 0.0


def test_share_is_zero_when_nothing_was_dispatched(store: TenantStore) -> None:
    store.set("acme", weight=1)
    (row,) = store.list()
    assert row.share_last_minute == 0.0 and row.dispatched_last_minute == 0


# -- CLI --------------------------------------------------------------------------


def test_cli_set_show_reset(invoke: Invoke, store: TenantStore, r: redis.Redis) -> None:
    r.hset(store.keys.tenant(store.shard("acme"), "acme"), "d:default:normal", "5")
    res = invoke("tenants", "set", "acme", "--weight", "4", "--max-in-flight", "50",
                 "--rate", "1200/m", "--max-priority", "normal", "--jitter", "30")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "weight         4" in res.output
    assert "max in-flight  50" in res.output
    assert "rate           20/s (burst 20)" in res.output
    assert "max priority   normal" in res.output
    assert "jitter         30s" in res.output
    assert store.get("acme") == TenantSettings(
        weight=4, max_in_flight=50, rate=20.0, max_priority="normal", jitter_s=30
    )

    res = invoke("tenants", "show", "acme", "--json")
    assert res.exit_code == 0, res.output
    shown = json.loads(res.output)
    assert shown["tenant"] == "acme" and shown["settings"]["weight"] == 4
    assert shown["settings"]["rate"] == 20
    assert (shown["in_flight"], shown["queued"], shown["share_last_minute"]) == (0, 0, 0)

    res = invoke("tenants", "show", "acme")
    assert res.exit_code == 0, res.output
    assert res.output.startswith("tenant acme  (shard ")
    assert "share 1 min    0.0% (0 dispatched)" in res.output

    res = invoke("tenants", "reset", "acme")
    assert res.exit_code == 0, res.output
    assert res.output.startswith("reset acme to defaults")
    assert tenant_hash(store, r, "acme") == {"d:default:normal": "5"}


def test_cli_list(invoke: Invoke, app: App, store: TenantStore, r: redis.Redis) -> None:
    res = invoke("tenants", "list")
    assert res.exit_code == 0 and "no tenants yet" in res.output
    a, b = two_tenants_on_different_shards()
    app.tasks["t.noop"].enqueue_many([(i,) for i in range(4)], _tenant=a)
    app.tasks["t.noop"].enqueue(1, _tenant=b)
    assert invoke("tenants", "set", a, "--weight", "4", "--max-in-flight", "50",
                  "--rate", "20/s", "--max-queued", "10000").exit_code == 0  # fmt: skip
    app.broker.leases.lease(store.shard(a), "w-1", 1, 30_000, ["default"])

    def check(minute: int) -> tuple[Result, Result]:
        r.delete(store.keys.minute(store.shard(a), minute - 1))
        r.delete(store.keys.minute(store.shard(b), minute - 1))
        r.hset(store.keys.minute(store.shard(a), minute), mapping=dispatched({a: 3}))
        r.hset(store.keys.minute(store.shard(b), minute), mapping=dispatched({b: 1}))
        return invoke("tenants", "list"), invoke("tenants", "list", "--json")

    text, as_json = with_stable_minute(r, check)
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[0].split() == [
        "tenant", "weight", "cap", "rate", "max", "queued", "commands", "in-flight", "queued",
        "share", "1m",
    ]  # fmt: skip
    assert lines[1].split() == [a, "4", "50", "20/s", "10000", "-", "1", "3", "75.0%"]
    assert lines[2].split() == [b, "1", "-", "-", "-", "-", "0", "1", "25.0%"]
    rows = json.loads(as_json.output)
    assert [row["tenant"] for row in rows] == [a, b]
    assert rows[0]["share_last_minute"] == pytest.approx(0.75)


def test_cli_errors_are_one_line(invoke: Invoke, store: TenantStore, r: redis.Redis) -> None:
    res = invoke("tenants", "set", "acme", "--weight", "0")
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "error: weight: 0.0 must be a number >= 1 and <= 1000 (default 1); for a smaller "
        "share, raise the other tenants' weights"
    ]
    res = invoke("tenants", "set", "acme", "--rate", "lots")
    assert res.exit_code == 2 and res.output.startswith("error: rate: 'lots' is not a rate")
    res = invoke("tenants", "set", "acme", "--max-in-flight", "-3")
    assert res.exit_code == 2 and "max_in_flight: -3 must be a whole number >= 0" in res.output
    res = invoke("tenants", "show", "a:b")
    assert res.exit_code == 2 and res.output.startswith("error: tenant: ")
    res = invoke("tenants", "set", "acme")
    assert res.exit_code == 2 and "nothing to set" in res.output
    assert tenant_hash(store, r, "acme") == {}


def _parked(app: App, tenant: str) -> set[str]:
    k, shard = app.broker.keys, shard_of(tenant, SHARDS)
    got = app.broker.client.hget(k.tenant(shard, tenant), "parked")
    return {qc for qc in got.decode().split(",") if qc} if got else set()


def _lease(app: App, tenant: str, n: int = 1, now: int | None = None) -> list[Any]:
    return app.broker.leases.lease(shard_of(tenant, SHARDS), "w-t", n, 60_000, ["default"], now=now)


def test_raising_a_parked_tenants_cap_unparks_it_at_once(app: App, store: TenantStore) -> None:
    # a tenant parked at its cap used to wait for one of its leases to end after
    # its cap was raised (tasks running for hours: hours), and doctor called it stuck
    store.set("acme", max_in_flight=1)
    for i in range(3):
        app.enqueue("t.noop", i, _tenant="acme")
    assert len(_lease(app, "acme", 3)) == 1
    assert _lease(app, "acme") == []
    assert _parked(app, "acme") == {"default|normal"}
    store.set("acme", max_in_flight=5)
    assert _parked(app, "acme") == set()
    assert len(_lease(app, "acme", 3)) == 2


def test_a_faster_rate_unparks_a_rate_limited_tenant_at_once(app: App, store: TenantStore) -> None:
    store.set("acme", rate="1/h")  # the next token is an hour away
    for i in range(3):
        app.enqueue("t.noop", i, _tenant="acme")
    assert len(_lease(app, "acme", 3)) == 1
    assert _parked(app, "acme") == {"default|normal"}
    store.set("acme", rate="100/s")
    # 50 ms later the bucket has refilled at the new rate: a token every 10 ms
    assert len(_lease(app, "acme", 3, now=app.broker.server_ms() + 50)) >= 1


def test_normal_operations_leave_no_parked_tenant_without_a_way_back(
    app: App, store: TenantStore
) -> None:
    # parked at its cap: each way its leases end (cancel, reap, hand back)
    # unparks it, also after the cap was lowered below what it holds
    b, shard = app.broker, shard_of("acme", SHARDS)
    store.set("acme", max_in_flight=3)
    ids = [app.enqueue("t.noop", i, _tenant="acme").id for i in range(6)]
    held = _lease(app, "acme", 3)
    assert _lease(app, "acme") == [] and _parked(app, "acme")
    store.set("acme", max_in_flight=1)  # lowered: still parked, 3 leases held
    assert _lease(app, "acme") == [] and _parked(app, "acme")
    b.cancel(held[0].iid)
    b.leases.fail(shard, "w-t", [FailItem(held[0].iid, held[0].epoch, "cancelled", "", False)])
    b.leases.release(shard, "w-t", [(held[1].iid, held[1].epoch)])
    b.maintenance.reap(shard, now=b.server_ms() + 120_000)
    assert b.client.zcard(b.keys.leases(shard, "acme")) == 0
    assert _parked(app, "acme") == set()
    assert len(_lease(app, "acme", 5)) == 1  # the lowered cap holds
    assert ids
