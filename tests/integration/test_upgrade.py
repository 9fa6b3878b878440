"""engine/upgrade.py: a deployment an older release wrote (key layout 1) is
brought to this release's layout by the first process to start, before any
script runs, and keeps what the retired kinds held."""

from __future__ import annotations

import logging

import pytest
import redis

from redcron import App
from redcron.keys import ACTIVITY_TTL_S, LAYOUT, Keys
from redcron.store import LoginLinks, TokenStore


def test_an_older_layout_is_upgraded_once_and_keeps_its_bookkeeping(
    redis_url: str, key_prefix: str, r: redis.Redis
) -> None:
    prefix = key_prefix.rstrip(":")
    k = Keys(prefix)
    stream = k.q(0, "default", "acme", "normal")
    # what an older release left: meta without a layout, the retired kinds
    r.hset(k.meta(), mapping={"shards": 1, "lease_ttl_s": 60, "min_lease_ttl_s": 5})
    r.sadd(k.tenants(0), "acme", "globex")
    r.zadd(k.retired(0, "tenantidx"), {"acme": 0})
    r.hset(k.retired(0, "reapcur"), stream, "5-0")
    r.hset(k.retired(0, "reapttl"), stream, 6000)
    r.set(k.retired(0, "recentcur"), 42)
    r.set(k.retired(0, "indexed"), 2)
    digest = "ab" * 20
    r.set(f"{k.retired(0, 'uniq')}:ac:me:{digest}", "0-U", px=60_000)
    r.set(f"{k.retired(0, 'debounce')}:acme:{digest}", "0-D", px=60_000)
    r.sadd(f"{k.retired(0, 'parked')}:acme", "default|normal", "gpu|high")
    r.zadd(f"{k.retired(0, 'tleases')}:acme", {"0-A": 5000})
    r.zadd(f"{k.retired(0, 'cks')}:acme:t.sync:cust:42", {"0-A": 5000})
    r.rpush(f"{k.retired(0, 'ckq')}:acme:t.sync:cust:42", "0-B", "0-C")
    r.hset(k.retired(0, "stats"), mapping={"fires": 7, "dead": 1})
    r.hset(k.retired(0, "attempts"), "acme|succeeded", 5)
    r.hset(k.retired(0, "attemptsall"), "succeeded", 5)
    r.hset(k.retired(0, "runends"), "acme|failed", 2)
    r.hset(k.retired(0, "runendsall"), "failed", 2)
    r.hset(k.retired(0, "lag"), mapping={"0.05": 3, "count": 3, "sum_ms": 90})
    r.hset(k.retired(0, "late"), mapping={"acme": 1, "*": 1})
    r.hset(k.counters(0), "fires", 1)  # counted by this release already: added to
    r.hset(f"{k.retired(0, 'adur')}:acme", mapping={"#names": 1, "t.a|1": 2, "t.a|sum_ms": 900})
    r.hset(f"{k.retired(0, 'rdur')}:acme", mapping={"#names": 1, "nightly|10": 1})
    # the per-minute figures of the last hour (layout 4): this minute's and one
    # 90 minutes old, which the dashboard no longer reads but which still lives
    minute = int(r.time()[0]) // 60
    for m in (minute, minute - 90):
        r.hset(f"{k.retired(0, 'act')}:{m}", mapping={"acme|succeeded": 2, "*|succeeded": 2})
        r.hset(f"{k.retired(0, 'lagm')}:{m}", mapping={"acme|0.05": 1, "*|0.05": 1})
    r.hset(f"{k.retired(0, 'disp')}:{minute}", mapping={"acme": 3, "*": 3})
    r.hset(k.minute(0, minute), "attempts:acme|succeeded", 1)  # counted by this release
    r.zadd(k.retired(0, "brkopen"), {"0-J1": 1_000_000})
    r.zadd(k.retired(0, "jobparked"), {"0-J2": 2_000, "0-J3": 3_000})
    r.rpush(f"{k.retired(0, 'held')}:0-J1", "0-J1@1000/t", "0-J1@2000/t")
    # a job's noted upstream successes; one of a job that is gone
    r.hset(k.job(0, "0-J1"), mapping={"id": "0-J1", "upstreams": "a,b"})
    r.sadd(f"{k.retired(0, 'chainok')}:0-J1", "a", "dropped")
    r.sadd(f"{k.retired(0, 'chainok')}:0-GONE", "a")
    # a tenant's jobs by name, and the listing index of that layout
    r.hset(f"{k.retired(0, 'jobs')}:acme", mapping={"nightly": "0-J1", "c": "0-J2"})
    r.zadd(k.jobidx(0), {"acme nightly": 0, "acme c": 0, "acme stale": 0})
    # ctx.once records: of a run's task, of a one-off task, of a task gone
    r.hset(k.run(0, "0-J1@5"), "tenant", "acme")
    r.hset(k.ti(0, "0-T1"), "tenant", "globex")
    r.set(f"{k.retired(0, 'once')}:0-J1@5:extract:charge", "1", ex=600)
    r.set(f"{k.retired(0, 'once')}:0-T1:mail", "1", ex=600)
    r.set(f"{k.retired(0, 'once')}:0-GONE:mail", "1", ex=600)
    # job chaining's reverse index: c (0-J2) names nightly (0-J1) in depends_on
    r.sadd(f"{k.retired(0, 'chaindown')}:acme:nightly", "c")
    r.sadd(f"{k.retired(0, 'chaindown')}:acme:gone", "c")
    # the shard's ownership: its fencing epoch must never go back, or a beat of
    # the old layout and one of the new could both fire with epoch 7
    r.hset(k.retired(0, "beat"), mapping={"owner": "b-old", "epoch": 7, "expiry": 1, "since": 0})
    app = App(redis_url, prefix=prefix)
    try:
        app.broker.ensure_meta()
        # the lifetime counters go on from where they were, in one hash
        assert r.hgetall(k.counters(0)) == {
            b"fires": b"8", b"dead": b"1",
            b"attempts:acme|succeeded": b"5", b"attempts:*|succeeded": b"5",
            b"runs:acme|failed": b"2", b"runs:*|failed": b"2",
            b"lag:0.05": b"3", b"lag:count": b"3", b"lag:sum_ms": b"90",
            b"late:acme": b"1", b"late:*": b"1",
        }  # fmt: skip
        counted = ["stats", "attempts", "attemptsall", "runends", "runendsall", "lag", "late"]
        assert not r.exists(*[k.retired(0, kind) for kind in counted])
        assert r.hgetall(k.durations(0, "acme")) == {
            b"task:#names": b"1", b"task:t.a|1": b"2", b"task:t.a|sum_ms": b"900",
            b"job:#names": b"1", b"job:nightly|10": b"1",
        }  # fmt: skip
        assert not r.exists(f"{k.retired(0, 'adur')}:acme", f"{k.retired(0, 'rdur')}:acme")
        # the minutes' figures in one hash per minute, the dashboard's hour goes on
        assert r.hgetall(k.minute(0, minute)) == {
            b"attempts:acme|succeeded": b"3", b"attempts:*|succeeded": b"2",
            b"lag:acme|0.05": b"1", b"lag:*|0.05": b"1",
            b"dispatched:acme": b"3", b"dispatched:*": b"3",
        }  # fmt: skip
        assert len(r.hgetall(k.minute(0, minute - 90))) == 4
        assert 0 < r.ttl(k.minute(0, minute - 90)) <= ACTIVITY_TTL_S
        assert not list(r.scan_iter(match=f"{k.shard(0)}act:*"))
        assert not list(r.scan_iter(match=f"{k.shard(0)}lagm:*"))
        assert not list(r.scan_iter(match=f"{k.shard(0)}disp:*"))
        # an open breaker is still shown, a parked job still counted
        # and its held work is still released when it closes
        assert r.zrange(k.attention(0), 0, -1, withscores=True) == [
            (b"breaker:0-J1", 0), (b"held:0-J1@1000/t", 0), (b"held:0-J1@2000/t", 0),
            (b"parked:0-J2", 0), (b"parked:0-J3", 0),
        ]  # fmt: skip
        assert not r.exists(k.retired(0, "brkopen"), k.retired(0, "jobparked"))
        assert not list(r.scan_iter(match=f"{k.shard(0)}held:*"))
        assert r.zrange(k.tenants(0), 0, -1, withscores=True) == [(b"acme", 0), (b"globex", 0)]
        assert r.hgetall(k.maintenance(0)) == {
            b"reap_cursor:" + stream.encode(): b"5-0",
            b"reap_ttl:" + stream.encode(): b"6000",
            b"recent_cursor": b"42",
            b"index_version": b"2",
            b"beat_owner": b"b-old", b"beat_epoch": b"7", b"beat_expiry": b"1", b"beat_since": b"0",
        }  # fmt: skip
        assert not r.exists(k.retired(0, "beat"))
        retired = ["tenantidx", "reapcur", "reapttl", "recentcur", "indexed"]
        assert not r.exists(*[k.retired(0, kind) for kind in retired])
        # a unique window and a debounce group open at the upgrade still hold
        assert r.get(k.dedupe(0, "ac:me", "unique", digest)) == b"0-U"
        assert r.get(k.dedupe(0, "acme", "debounce", digest)) == b"0-D"
        assert 0 < r.pttl(k.dedupe(0, "acme", "debounce", digest)) <= 60_000
        assert not list(r.scan_iter(match=f"{k.shard(0)}uniq:*"))
        # a parked tenant stays parked, so the next lease end gives its rings back
        assert r.hget(k.tenant(0, "acme"), "parked") == b"default|normal,gpu|high"
        assert not r.exists(f"{k.retired(0, 'parked')}:acme")
        # a lease still counts against the cap, a slot is still taken, a waiter waits
        assert r.zrange(k.leases(0, "acme"), 0, -1, withscores=True) == [(b"0-A", 5000)]
        assert r.zrange(k.ckslots(0, "acme", "t.sync", "cust:42"), 0, -1) == [b"0-A"]
        assert r.lrange(k.ckwaiting(0, "acme", "t.sync", "cust:42"), 0, -1) == [b"0-B", b"0-C"]
        assert not list(r.scan_iter(match=f"{k.shard(0)}tleases:*"))
        assert not list(r.scan_iter(match=f"{k.shard(0)}ck[sq]:*"))
        # a noted upstream success still counts; the job of none is not made
        assert r.hget(k.job(0, "0-J1"), "chain_ok") == b"a"
        assert not r.exists(k.job(0, "0-GONE"))
        assert not list(r.scan_iter(match=f"{k.shard(0)}chainok:*"))
        # a job is still found by name, and listed
        assert r.zrange(k.jobidx(0), 0, -1) == [b"acme c 0-J2", b"acme nightly 0-J1"]
        assert app.jobs.job_id("nightly", tenant="acme") == "0-J1"
        assert not r.exists(f"{k.retired(0, 'jobs')}:acme")
        # a recorded effect is still recorded, under its task's tenant
        assert 0 < r.ttl(k.dedupe(0, "acme", "once", "0-J1@5:extract:charge")) <= 600
        assert r.get(k.dedupe(0, "globex", "once", "0-T1:mail")) == b"1"
        assert not list(r.scan_iter(match=f"{k.shard(0)}once:*"))
        # an upstream still knows its dependents (its success starts them)
        assert r.hget(k.job(0, "0-J1"), "chain_down") == b"c"
        assert not list(r.scan_iter(match=f"{k.shard(0)}chaindown:*"))
        assert int(r.hget(k.meta(), "layout") or 0) == LAYOUT
        # this release's scripts write the converted keys
        app.tenants.set("initech", weight=2)
        assert r.zscore(k.tenants(0), "initech") == 0
        # a second start does nothing (the layout is recorded)
        r.sadd(k.retired(0, "tenantidx"), "left")
        app.broker.ensure_meta()
        assert r.exists(k.retired(0, "tenantidx"))
    finally:
        app.close()


def test_a_new_deployment_is_born_at_this_layout_and_not_upgraded(
    redis_url: str, key_prefix: str, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    # before: a fresh `make run` logged "upgraded to key layout 4" and ran every
    # upgrade step's SCAN over a keyspace it had just created
    prefix = key_prefix.rstrip(":")
    caplog.set_level(logging.INFO, logger="redcron.engine.upgrade")
    app = App(redis_url, prefix=prefix)
    try:
        app.broker.ensure_meta()
        assert int(r.hget(Keys(prefix).meta(), "layout") or 0) == LAYOUT
        assert not [rec for rec in caplog.records if "upgraded" in rec.getMessage()]
    finally:
        app.close()


def test_layout_4_deployment_wide_keys_move_into_one_slot(
    redis_url: str, key_prefix: str, r: redis.Redis
) -> None:
    """Layout 5 (issue 30 §2.5): the deployment-wide keys move under ``{g}`` with
    their values and expiries; a token made before still verifies, a login link
    made before still works once, the registries and secrets carry over."""
    prefix = key_prefix.rstrip(":")
    k = Keys(prefix)
    # a layout-4 deployment, as the release before wrote it (its own key names)
    made = App(redis_url, prefix=prefix)
    try:
        made.broker.ensure_meta()
        info, secret = TokenStore(made.broker).create_tenant("acme")
        link = LoginLinks(made.broker).create()
        session = LoginLinks(made.broker).session_secret()
    finally:
        made.close()
    names = [k.meta(), k.tokens(), k.token(info.id), k.session_secret()]
    names += [key.decode() for key in r.scan_iter(match=f"{prefix}:{{g}}:login:*")]
    assert len(names) == 5
    for name in names:
        ttl = r.pttl(name)
        old = name.replace(":{g}:", ":", 1)
        r.restore(old, max(ttl, 0), r.dump(name))
        r.delete(name)
    r.hset(k.legacy_deployment("meta"), "layout", 4)
    r.zadd(k.legacy_deployment("workers"), {"w1": 10**13})
    r.hset(k.legacy_deployment("worker:w1"), mapping={"id": "w1", "host": "h"})
    r.pexpire(k.legacy_deployment("worker:w1"), 600_000)

    app = App(redis_url, prefix=prefix)
    try:
        assert app.broker.ensure_meta() == 1
        assert int(r.hget(k.meta(), "layout") or 0) == LAYOUT == 5
        for name in [*names, k.workers(), k.worker("w1")]:
            assert r.exists(name), name
            assert not r.exists(name.replace(":{g}:", ":", 1)), name
        assert 0 < r.pttl(k.worker("w1")) <= 600_000  # its expiry came along
        assert TokenStore(app.broker).verify(secret) is not None
        assert LoginLinks(app.broker).session_secret() == session
        assert LoginLinks(app.broker).consume(link) is not None
        # a second start finds nothing to move and changes nothing
        app.broker.ensure_meta()
        assert TokenStore(app.broker).verify(secret) is not None
    finally:
        app.close()
