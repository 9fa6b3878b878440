"""keys: one module builds every key; shard placement is stable across processes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redcron.errors import NotFound
from redcron.keys import (
    PRIORITIES,
    TEMPLATES,
    Keys,
    glob_escape,
    job_of_run,
    lua_key_functions,
    manual_run_id,
    q_tenant,
    run_id,
    shard_of,
    shard_of_id,
)


def test_shard_of_is_stable_crc32() -> None:
    # Hard-coded: a tenant must land on the same shard in every process and
    # release (crc32, not Python's salted hash()).
    assert [shard_of(t, 16) for t in ("acme", "globex", "initech", "default")] == [14, 10, 0, 15]
    assert [shard_of(t, 3) for t in ("acme", "globex", "initech", "default")] == [2, 1, 0, 1]
    assert shard_of("anything", 1) == 0


@given(st.text(max_size=64), st.integers(min_value=1, max_value=1024))
def test_shard_of_is_in_range_and_deterministic(tenant: str, shards: int) -> None:
    s = shard_of(tenant, shards)
    assert 0 <= s < shards
    assert s == shard_of(tenant, shards)


def test_key_layout() -> None:
    k = Keys("rc")
    assert k.meta() == "rc:{g}:meta"
    assert k.token("t1") == "rc:{g}:token:t1"
    assert k.shard(3) == "rc:{s3}:"
    assert k.ti(0, "0-ABC") == "rc:{s0}:ti:0-ABC"
    assert k.q(1, "default", "acme", "high") == "rc:{s1}:q:default:acme:high"
    assert k.ring(1, "default", "low") == "rc:{s1}:ring:default:low"
    assert k.pending(2) == "rc:{s2}:pending"
    assert k.leases(2, "acme") == "rc:{s2}:leases:acme"
    assert k.timers(0) == "rc:{s0}:timers"
    assert k.dlq(0, "acme") == "rc:{s0}:dlq:acme"
    assert k.wake(0, "gpu") == "rc:{s0}:wake:gpu"
    assert k.log(0, "0-ABC", 2) == "rc:{s0}:log:0-ABC:2"
    assert k.done(0, "0-ABC") == "rc:{s0}:done:0-ABC"
    assert k.dedupe(0, "acme", "once", "idem:x") == "rc:{s0}:dedupe:acme:once:idem:x"
    assert k.tenants(0) == "rc:{s0}:tenants"
    assert k.queues(0) == "rc:{s0}:queues"
    assert k.counters(0) == "rc:{s0}:counters"
    assert k.lock(0, "maintenance") == "rc:{s0}:lock:maintenance"
    assert Keys("other").ti(0, "x") == "other:{s0}:ti:x"


def test_every_template_has_a_method_and_shares_the_hash_tag() -> None:
    k = Keys("rc")
    for kind, (_template, names) in TEMPLATES.items():
        method = getattr(k, kind)
        key = method(5, *(f"v{i}" for i in range(len(names))))
        assert key == k.build(5, kind, *(f"v{i}" for i in range(len(names))))
        assert key.startswith("rc:{s5}:")
        # exactly one hash tag, so the slot is that of "s5"
        assert re.findall(r"\{[^}]*\}", key) == ["{s5}"]


def test_build_checks_arity() -> None:
    with pytest.raises(TypeError, match="ti"):
        Keys().build(0, "ti")
    with pytest.raises(TypeError):
        Keys().build(0, "pending", "extra")
    with pytest.raises(KeyError):
        Keys().build(0, "nope")


def test_lua_key_functions_cover_every_template() -> None:
    src = lua_key_functions()
    assert src.count("local function key_") == len(TEMPLATES)
    for kind, (_template, names) in TEMPLATES.items():
        assert f"local function key_{kind}({', '.join(names)})" in src
    assert "local KP = KEYS[1]" in src
    # no Python quoting leaks into Lua
    assert "'" not in src


def test_priorities_are_ordered_high_first() -> None:
    assert PRIORITIES == ("high", "normal", "low")


def test_run_ids_are_derived_from_the_fire_and_name_their_job() -> None:
    assert run_id("0-01J", 1_764_561_600_000) == "0-01J@1764561600000"
    assert manual_run_id("0-01J", "01K") == "0-01J@m01K"
    assert job_of_run("0-01J@1764561600000") == job_of_run("0-01J@m01K") == "0-01J"
    assert job_of_run("no-sep") == "no-sep"
    assert "local function make_run_id(job_id, fire_ms)" in lua_key_functions()
    assert "local function job_of_run(run_id)" in lua_key_functions()


def test_shard_of_id_reads_the_shard_an_id_carries() -> None:
    assert shard_of_id("12-01J") == 12
    assert shard_of_id(run_id("3-01J", 5)) == 3
    for bad in ("", "x-01J", "01J", "\u00b2-01J"):
        with pytest.raises(NotFound):
            shard_of_id(bad)


def test_q_tenant_reads_the_tenant_a_ready_stream_names() -> None:
    k = Keys("rc")
    assert q_tenant(k, 1, k.q(1, "default", "acme", "high")) == "acme"
    assert q_tenant(k, 1, k.q(2, "default", "acme", "high")) is None  # another shard
    assert q_tenant(k, 1, k.leases(1, "acme")) is None
    assert q_tenant(Keys("other"), 1, k.q(1, "default", "acme", "high")) is None


def test_every_deployment_wide_key_is_in_one_slot() -> None:
    """Layout 5: on a Redis Cluster one master down took the deployment-wide keys
    its slots held (the meta, tokens, registries...), and every page with them."""
    import redis.crc

    k = Keys("rc")
    built = [
        k.meta(), k.beats(), k.workers(), k.workeridx(), k.worker("w"), k.tokens(),
        k.token("t"), k.actions_all(), k.login("c"), k.session_secret(), k.lease_secret(),
        k.channel_secret(), k.channels(),
    ]  # fmt: skip
    assert len({redis.crc.key_slot(key.encode()) for key in built}) == 1


def test_glob_escape() -> None:
    assert glob_escape("rc:{s0}:ti:") == "rc:{s0}:ti:"
    assert glob_escape("a*b?[c]\\") == "a\\*b\\?\\[c\\]\\\\"
