"""A cluster that answers ``CLUSTERDOWN`` (a restarted master for its first ~2 s,
every node while a slot has no master and full coverage is required): a call is
:class:`RedisUnavailable`, never a ScriptError ("a bug"), and the API answers
503 with ``Retry-After``.

The state is held, not raced: with ``cluster-require-full-coverage yes`` a
killed master (no replica to promote) leaves its slots uncovered, and every
live node answers ``CLUSTERDOWN`` until it is back; the test polls until a
live master says so, then calls.  On its own cluster (it changes settings).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import chaos_app  # tests/apps
import pytest
import redis
import redis.cluster
from polling import wait_for  # tests/helpers
from redis_binary import redis_server_path
from worker_procs import thread_workers

from redcron import App
from redcron.chaos.outage import master_of_slot, shard_masters, spread_tenants
from redcron.dashboard import create_app
from redcron.dashboard.totals import count
from redcron.embedded_cluster import EmbeddedCluster
from redcron.engine import key_slot
from redcron.errors import RedisUnavailable, ScriptError
from redcron.keys import Keys, shard_of
from redcron.model.jobs import Task, job_spec
from redcron.store import ChannelStore

SHARDS = 12
MASTERS = 3
ADMIN = "down-admin-token"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(
        Path(tmp_path_factory.mktemp("cluster-down")), masters=MASTERS, binary=redis_server_path()
    )
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def dapp(cluster: EmbeddedCluster) -> Iterator[App]:
    a = App(cluster.url, prefix=f"d{uuid.uuid4().hex[:8]}", shards=SHARDS, min_lease_ttl=0.5)
    chaos_app.register(a)
    assert a.broker.shards == SHARDS  # the deployment exists before the cluster goes down
    yield a
    a.close()


def tenants(app: App) -> list[str]:
    """Tenant ``i`` lives on a shard of master ``i``."""
    return list(spread_tenants(("ta", "tb", "tc"), SHARDS, MASTERS, app.settings.prefix))


def _require_coverage(cluster: EmbeddedCluster, masters: list[int], value: str) -> None:
    for m in masters:
        with redis.Redis(port=cluster.ports[m], socket_timeout=5) as c:
            c.config_set("cluster-require-full-coverage", value)


def _clusterdown(port: int, key: str) -> bool:
    """Whether the node on ``port`` answers ``CLUSTERDOWN`` for ``key``."""
    with redis.Redis(port=port, socket_timeout=5) as c:
        try:
            c.get(key)
        except redis.exceptions.ClusterDownError:
            return True
        except redis.ResponseError:  # MOVED...: not this node's key
            return False
    return False


@pytest.fixture
def down_cluster(cluster: EmbeddedCluster, dapp: App) -> Iterator[str]:
    """Master 0 killed with full coverage required: master 1 answers CLUSTERDOWN
    for its own slots (polled until it does).  Yields a tenant of master 1."""
    live = [1, 2]
    _require_coverage(cluster, [0, 1, 2], "yes")
    cluster.kill_master(0)
    tenant = tenants(dapp)[1]
    probe = Keys(dapp.settings.prefix).shard(shard_of(tenant, SHARDS)) + "probe"
    try:
        wait_for(lambda: _clusterdown(cluster.ports[1], probe), "master 1 to say CLUSTERDOWN")
        yield tenant
    finally:
        _require_coverage(cluster, live, "no")
        cluster.start_master(0)  # started with its usual "no"


def test_an_enqueue_in_clusterdown_is_redis_unavailable_not_a_script_error(
    dapp: App, down_cluster: str
) -> None:
    with pytest.raises(RedisUnavailable) as caught:
        dapp.enqueue("echo", "x", _tenant=down_cluster)
    assert not isinstance(caught.value, ScriptError)
    assert caught.value.reply_code == "CLUSTERDOWN"
    assert "CLUSTERDOWN" in str(caught.value)


def test_the_api_answers_503_with_retry_after_in_clusterdown(dapp: App, down_cluster: str) -> None:
    web = create_app(dapp, admin_token=ADMIN)
    resp = web.test_client().post(
        "/v1/tasks",
        json={"name": "echo", "args": ["x"], "tenant": down_cluster},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    assert resp.status_code == 503, resp.get_data(as_text=True)
    assert resp.headers["Retry-After"] == str(web.config["REDCRON_RETRY_AFTER_S"])
    error = resp.get_json()["error"]
    assert error["code"] == "unavailable"
    # which shard, not where Redis is (the body is for clients)
    assert f"shard {shard_of(down_cluster, SHARDS)}" in error["message"]
    assert "127.0.0.1" not in error["message"]


def test_a_worker_backs_off_in_clusterdown_and_resumes_after(
    dapp: App, cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker meeting CLUSTERDOWN on every shard treats it as an outage (one
    WARNING, back-off, no traceback, no "bug"), and serves again once the
    cluster does."""
    tenant = tenants(dapp)[1]
    queued = dapp.enqueue("echo", "x", _tenant=tenant)  # before the cluster goes down
    probe = Keys(dapp.settings.prefix).shard(shard_of(tenant, SHARDS)) + "probe"
    _require_coverage(cluster, [0, 1, 2], "yes")
    cluster.kill_master(0)
    try:
        wait_for(lambda: _clusterdown(cluster.ports[1], probe), "master 1 to say CLUSTERDOWN")
        caplog.set_level(logging.DEBUG, logger="redcron")
        with thread_workers(dapp, "down-worker") as start:
            start(concurrency=1)
            wait_for(lambda: "CLUSTERDOWN" in caplog.text, "the worker to meet CLUSTERDOWN")
            # master 0's shards stay down; the others serve again without full coverage
            _require_coverage(cluster, [1, 2], "no")
            assert queued.result(timeout=30) == "x"
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
        assert errors == [], [r.getMessage() for r in errors]
        assert "ScriptError" not in caplog.text
    finally:
        _require_coverage(cluster, [1, 2], "no")
        cluster.start_master(0)


# -- the caller's shard gate (issue 30 §2.3) ------------------------------------------


@pytest.fixture
def master0_down(cluster: EmbeddedCluster, dapp: App) -> Iterator[None]:
    # a job on master 0's tenant, put while it is up
    dapp.jobs.put(job_spec("nightly", tasks={"t": Task("echo")}, cron="0 2 * * *",
                           tenant=tenants(dapp)[0]))  # fmt: skip
    cluster.kill_master(0)
    try:
        yield
    finally:
        cluster.start_master(0)


def test_an_enqueue_to_a_dead_master_fails_fast_the_second_time(
    dapp: App, master0_down: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead, live = tenants(dapp)[0], tenants(dapp)[1]
    shard = shard_of(dead, SHARDS)
    with pytest.raises(RedisUnavailable) as first:
        dapp.enqueue("echo", "x", _tenant=dead)  # tries the node: refused
    assert first.value.shard == shard
    gate = dapp.broker.gate
    assert shard in gate.failing
    assert set(dapp.broker.shards_with(shard)) <= gate.failing  # the node's other shards too

    calls: list[str] = []
    real_run, real_replicated = dapp.broker.scripts.run, dapp.broker.scripts.run_replicated
    monkeypatch.setattr(
        dapp.broker.scripts, "run", lambda n, *a, **k: (calls.append(n), real_run(n, *a, **k))[1]
    )
    monkeypatch.setattr(
        dapp.broker.scripts,
        "run_replicated",
        lambda n, *a, **k: (calls.append(n), real_replicated(n, *a, **k))[1],
    )
    with pytest.raises(RedisUnavailable) as second:
        dapp.enqueue("echo", "x", _tenant=dead)
    assert calls == []  # no script call, no connection attempt: the gate said no
    assert second.value.shard == shard
    assert f"shard {shard}" in str(second.value) and "master 127.0.0.1:" in str(second.value)

    # a trigger of a job there too (its lookup and its fire): no call either
    monkeypatch.setattr(dapp.broker.client, "zrangebylex", lambda *a, **k: calls.append("z"))
    with pytest.raises(RedisUnavailable) as third:
        dapp.jobs.trigger("nightly", tenant=dead)
    assert calls == [] and third.value.shard == shard

    # the live masters' shards are not held back
    assert dapp.enqueue("echo", "y", _tenant=live).id
    assert calls == ["enqueue"]


def test_the_gate_tries_the_node_again_after_its_delay(dapp: App, cluster: EmbeddedCluster) -> None:
    dead = tenants(dapp)[0]
    shard = shard_of(dead, SHARDS)
    cluster.kill_master(0)
    try:
        with pytest.raises(RedisUnavailable):
            dapp.enqueue("echo", "x", _tenant=dead)
        assert shard in dapp.broker.gate.failing
    finally:
        cluster.start_master(0)

    def goes_through() -> bool:
        try:
            dapp.enqueue("echo", "x", _tenant=dead)
        except RedisUnavailable:
            return False
        return True

    wait_for(goes_through, "an enqueue to the restarted master")
    assert not dapp.broker.gate.failing


# -- the views answer with what the live shards hold (issue 30 §2.5) -------------------


def test_lists_and_pages_answer_with_the_live_shards_and_name_the_others(
    dapp: App, cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A master down took every cross-tenant view with it (503 for all); now the
    lists, a live tenant's status and the pages answer with what the other
    masters hold, and name the shards that did not answer."""
    prefix = dapp.settings.prefix
    home = master_of_slot(key_slot(Keys(prefix).meta()), MASTERS)  # the {g} slot's master
    dead = (home + 1) % MASTERS
    where = shard_masters(SHARDS, MASTERS, prefix)
    gone = sorted(s for s, m in where.items() if m == dead)
    names = tenants(dapp)
    for t in names:
        dapp.jobs.put(job_spec("nightly", tasks={"t": Task("echo")}, cron="0 2 * * *", tenant=t))
        dapp.jobs.trigger("nightly", tenant=t)
    live, down = [t for i, t in enumerate(names) if i != dead], names[dead]
    # channels until one has its slot on the dead master and one on a live one
    store = ChannelStore(dapp.broker)
    monkeypatch.setattr(store, "allow", lambda: ("127.0.0.1",))
    dead_port = cluster.ports[dead]
    on: dict[bool, list[str]] = {True: [], False: []}
    while not (on[True] and on[False]):
        info, _secret = store.add(None, "webhook", "http://127.0.0.1:9/hook")
        on[cluster.owner(key_slot(dapp.broker.keys.channel(info.id))) == dead_port].append(info.id)
    web = create_app(dapp, admin_token=ADMIN)
    client = web.test_client()
    auth = {"Authorization": f"Bearer {ADMIN}"}
    cluster.kill_master(dead)
    try:
        for _ in range(2):  # the first asks the dead master, the second its gate
            resp = client.get(f"/v1/tenants/{live[0]}", headers=auth)
            assert resp.status_code == 200, resp.get_data(as_text=True)
            assert resp.get_json()["unavailable_shards"] == gone
        listed = client.get("/v1/tenants", headers=auth)
        assert listed.status_code == 200, listed.get_data(as_text=True)
        body = listed.get_json()
        assert [t["tenant"] for t in body["tenants"]] == sorted(live)
        assert body["unavailable_shards"] == gone
        runs = client.get("/v1/runs", headers=auth).get_json()
        assert sorted({r["job_id"] for r in runs["runs"]}) == sorted(
            dapp.jobs.job_id("nightly", tenant=t) for t in live
        )
        assert runs["unavailable_shards"] == gone
        jobs = client.get("/v1/jobs", headers=auth).get_json()
        assert len(jobs["jobs"]) == len(live) and jobs["unavailable_shards"] == gone
        dead_tasks = client.get("/v1/dlq", headers=auth)
        assert dead_tasks.status_code == 200, dead_tasks.get_data(as_text=True)
        assert dead_tasks.get_json()["unavailable_shards"] == gone
        # the dead master's own tenant: its shard is not there to read
        assert client.get(f"/v1/tenants/{down}", headers=auth).status_code == 503

        # the channels: those whose slot's master is alive, the others named
        channels = client.get("/v1/channels", headers=auth)
        assert channels.status_code == 200, channels.get_data(as_text=True)
        body = channels.get_json()
        assert sorted(c["id"] for c in body["channels"]) == sorted(on[False])
        assert body["unavailable_channels"] == sorted(on[True])

        # /metrics: the live shards' series, each shard's up gauge, no sums short of one
        scrape = client.get("/metrics")
        assert scrape.status_code == 200, scrape.get_data(as_text=True)[:300]
        text = scrape.get_data(as_text=True)
        for s in range(SHARDS):
            assert f'redcron_shard_up{{shard="{s}"}} {0.0 if s in gone else 1.0}' in text
        assert "\nredcron_tenants " not in text and "redcron_runs_all_total" not in text
        # per-tenant series: the live tenants' (their runs' tasks are ready), none of the dead's
        assert all(f'tenant="{t}"' in text for t in live) and f'tenant="{down}"' not in text
        # the overview's background totals count the live shards and name the others
        snap = count(dapp)
        assert snap.unavailable_shards == gone
        assert set(snap.delayed_by_tenant) <= set(live)

        # the pages, logged in (the session secret is in the {g} slot, alive)
        assert client.get("/login").status_code == 200
        with client.session_transaction() as session:
            csrf = session["csrf_token"]
        login = client.post("/login", data={"token": ADMIN, "csrf_token": csrf})
        assert login.status_code == 303
        for path in ("/", "/tenants", "/runs", "/jobs", "/dlq", "/tasks"):
            page = client.get(path)
            assert page.status_code == 200, (path, page.get_data(as_text=True)[:300])
            text = page.get_data(as_text=True)
            assert f"Shards {', '.join(map(str, gone))} did not answer" in text, path
        page = client.get("/channels")
        assert page.status_code == 200, page.get_data(as_text=True)[:300]
        assert f"Channels {', '.join(sorted(on[True]))} did not answer" in page.get_data(
            as_text=True
        )
        # a request that met no missing shard says nothing of them (the restarted
        # master, without an AOF here, comes back empty)
        cluster.start_master(dead)
        for s in gone:
            dapp.broker.gate.ok(s)
        ok = client.get("/v1/tenants", headers=auth)
        assert ok.status_code == 200 and "unavailable_shards" not in ok.get_json()
    finally:
        cluster.start_master(dead)


def test_the_layout_5_move_works_across_the_masters(cluster: EmbeddedCluster) -> None:
    """The deployment-wide keys of a layout-4 deployment sit on several masters;
    the upgrade copies each into the {g} slot (RENAME cannot cross slots)."""
    rc = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    # a prefix whose old keys are spread over the masters (a random one puts all
    # three on one master once in nine)
    for _ in range(100):
        prefix = f"u{uuid.uuid4().hex[:8]}"
        k = Keys(prefix)
        old = {
            k.legacy_deployment("meta"): {"shards": SHARDS, "lease_ttl_s": 60,
                                          "min_lease_ttl_s": 0.5, "layout": 4},
            k.legacy_deployment("token:t1"): {"id": "t1", "kind": "tenant", "tenant": "acme"},
            k.legacy_deployment("worker:w1"): {"id": "w1"},
        }  # fmt: skip
        slots = {rc.keyslot(name) for name in old}
        if len({master_of_slot(s, MASTERS) for s in slots}) > 1:
            break
    try:
        assert len({master_of_slot(s, MASTERS) for s in slots}) > 1  # spread, as they were
        for name, fields in old.items():
            rc.hset(name, mapping=fields)
        app = App(cluster.url, prefix=prefix)
        try:
            assert app.broker.ensure_meta() == SHARDS
        finally:
            app.close()
        for name in old:
            new = name.replace(f"{prefix}:", f"{prefix}:{{g}}:", 1)
            assert rc.exists(new) and not rc.exists(name), name
        assert rc.hget(k.token("t1"), "tenant") == b"acme"
        assert int(rc.hget(k.meta(), "layout") or 0) == 5
    finally:
        for name in rc.scan_iter(match=f"{prefix}:*"):
            rc.delete(name)
        rc.close()
