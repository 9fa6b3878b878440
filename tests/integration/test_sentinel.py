"""Redis Sentinel: a master, a replica and three sentinels; a worker process, a
beat process and a producer run through a forced ``SENTINEL FAILOVER``.

What must hold (docs/operations.md, "Failover"):

- everyone follows the new master (``redis+sentinel://`` URLs, scripts loaded
  again there: Redis 7 does not replicate its script cache);
- the beat fires every second once, none skipped, through the failover;
- every task whose enqueue was acknowledged ends succeeded — with
  ``durability=normal`` except those acknowledged in the failover's window
  (asynchronous replication: the old master accepts writes until the
  sentinels demote it, and those are lost); with ``durability=strict`` none is
  lost, and no task whose success a worker reported (acknowledged) runs again.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import chaos_app  # tests/apps
import pytest
from click.testing import CliRunner
from sentinels import Topology, sentinel_topology  # tests/helpers
from worker_procs import wait_for, worker_spawner
from workload import (
    Producer,
    beat_spawner,
    every_second_job,
    fire_times,
    reported_successes,
)

from redcron import App
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.errors import NotFound
from redcron.model.states import TaskState
from redcron.redact import masked_url

pytestmark = [pytest.mark.slow, pytest.mark.chaos]


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    if os.environ.get("REDCRON_TEST_REDIS_URL"):
        pytest.skip("REDCRON_TEST_REDIS_URL is set: this test starts its own servers")
    with sentinel_topology(tmp_path_factory.mktemp("sentinel")) as topo:
        yield topo


def test_a_sentinel_url_reaches_the_master_and_masks_its_password(topology: Topology) -> None:
    url = topology.url.replace("redis+sentinel://", "redis+sentinel://:s3cret@", 1)
    assert "s3cret" not in masked_url(url)
    app = App(topology.url, prefix="rc-sentinel-probe")
    try:
        assert app.broker.ensure_meta() == 1
        assert app.broker.client.connection_pool.master_address[1] == topology.master_port()
        # the dashboard and the CLI take the same URL
        web = create_app(app, admin_token="t0ken").test_client()
        metrics = web.get("/metrics")
        assert metrics.status_code == 200, metrics.get_data(as_text=True)
        res = CliRunner().invoke(main, ["inspect", "--redis", topology.url])
        assert res.exit_code == 0, res.output
        # an unreachable set of sentinels: one line, the password masked
        dead = url.replace(str(topology.sentinels[0].port), "1").split(",")[0] + "/mymaster"
        res = CliRunner().invoke(main, ["inspect", "--redis", dead])
        assert res.exit_code == 1
        assert "s3cret" not in res.output and "No master found for 'mymaster'" in res.output
    finally:
        app.close()


@pytest.mark.parametrize("durability", ["normal", "strict"])
def test_workers_beats_and_clients_follow_a_failover(
    topology: Topology, tmp_path: Path, durability: str
) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    env = {"REDCRON_DURABILITY": durability}
    app = App(topology.url, prefix=prefix, min_lease_ttl=0.5, durability=durability)
    chaos_app.register(app)
    with (
        worker_spawner(topology.url, prefix, tmp_path, env, concurrency=4) as spawn,
        beat_spawner(topology.url, prefix, tmp_path, env) as spawn_beat,
    ):
        job = every_second_job(app)
        worker = spawn(lease_ttl=2.0)
        beat = spawn_beat("beat0")
        wait_for(lambda: len(app.jobs.runs(job)) >= 2, "the beat fires", 20)
        producer = Producer(app).start()
        time.sleep(1.0)
        began = time.monotonic()
        old, new = topology.failover()
        followed = time.monotonic()
        assert new != old
        time.sleep(3.0)  # enqueues go on against the new master
        producer.stop()
        ended = time.monotonic()

        # everyone is on the new master and works there
        assert app.enqueue("echo", "after").result(timeout=30) == "after"
        wait_for(lambda: topology.master_port() == new, "the master stays put", 5)
        acked = dict(producer.acked)
        assert acked, producer.errors
        lost: list[tuple[str, float]] = []
        for iid, at in acked.items():
            try:
                app.broker.inspection.task_info(iid)
            except NotFound:
                lost.append((iid, at))
        gone = {iid for iid, _at in lost}
        for iid in (i for i in acked if i not in gone):
            wait_for(
                lambda iid=iid: app.broker.inspection.task_info(iid).state == TaskState.SUCCEEDED,
                f"task {iid} succeeds",
                30,
            )
        nominal = fire_times(app, job)
        server_now = app.broker.server_ms()
        assert nominal[-1] >= server_now - 4000, "the beat stopped firing after the failover"
        assert worker.poll() is None and beat.proc.poll() is None

        reported = reported_successes(worker.log())
        rerun = [
            iid for iid, attempt in reported.items()
            if iid in acked and iid not in gone
            and app.broker.inspection.task_info(iid).attempt != attempt
        ]  # fmt: skip
        print(
            f"durability={durability}: {len(acked)} enqueues acknowledged, {len(lost)} lost, "
            f"{len(producer.errors)} refused; failover took {followed - began:.1f}s; "
            f"{len(rerun)} reported successes ran again; fires {len(nominal)}"
        )
        if durability == "strict":
            assert lost == [], "an acknowledged enqueue was lost under durability=strict"
            assert rerun == [], "a success reported under durability=strict ran again"
        else:
            # async replication: only what the old master acknowledged in the
            # failover's window (from a second before SENTINEL FAILOVER until the
            # sentinels had demoted it) may be gone
            assert all(began - 1.0 <= at <= followed for _iid, at in lost), (lost, began, followed)
        assert ended > followed
    app.close()
