"""``rediss://`` with a self-signed CA, as a user limited to the ``rc:*`` keys by the
ACL line of docs/operations.md: the worker, the beat, the dashboard (API and
/metrics) and the CLI all work, and the password shows nowhere they print."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import chaos_app  # tests/apps
import pytest
import redis
from click.testing import CliRunner
from tls_redis import RC_PASSWORD, TlsRedis  # tests/helpers
from worker_procs import wait_for, worker_spawner
from workload import beat_spawner, every_second_job

from redcron import App
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.model.states import TaskState

ADMIN = "admin-token-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    try:
        srv = TlsRedis(tmp_path_factory.mktemp("tls"))
    except FileNotFoundError:
        pytest.skip("openssl is not installed: no certificates for the TLS server")
    try:
        srv.start()
    except redis.ConnectionError as exc:
        pytest.skip(f"this redis-server does not speak TLS ({exc})")
    yield srv
    srv.stop()


@pytest.fixture
def app(server: TlsRedis) -> Iterator[App]:
    # the ACL allows rc:* only: the deployment's prefix is the default "rc"
    a = App(server.url(), min_lease_ttl=0.5)
    chaos_app.register(a)
    yield a
    a.close()
    admin = server.admin()
    admin.flushdb()
    admin.close()


def test_the_acl_is_in_force(server: TlsRedis) -> None:
    client = redis.Redis.from_url(server.url())
    try:
        client.set("rc:probe", "1")
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.set("other:probe", "1")
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.info()
    finally:
        client.close()


def test_worker_beat_dashboard_and_cli_over_tls_as_the_limited_user(
    server: TlsRedis, app: App, tmp_path: Path
) -> None:
    url = server.url()
    with (
        worker_spawner(url, "rc", tmp_path, concurrency=2) as spawn,
        beat_spawner(url, "rc", tmp_path) as spawn_beat,
    ):
        job = every_second_job(app)
        worker = spawn(lease_ttl=2.0)
        beat = spawn_beat("beat0")
        handle = app.enqueue("echo", "over tls")
        assert handle.result(timeout=30) == "over tls"
        wait_for(lambda: len(app.jobs.runs(job)) >= 2, "the beat fires", 20)
        run = app.jobs.runs(job)[-1]
        wait_for(
            lambda: app.jobs.run(run.id).state == "succeeded", "the fired run is done by the worker"
        )

        # the dashboard: the API and /metrics
        web = create_app(app, admin_token=ADMIN).test_client()
        web.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
        got = web.get(f"/v1/tasks/{handle.id}")
        assert got.status_code == 200, got.get_data(as_text=True)
        assert got.get_json()["state"] == TaskState.SUCCEEDED
        metrics = web.get("/metrics")
        assert metrics.status_code == 200
        assert "redcron_workers_live 1" in metrics.get_data(as_text=True)

        # the CLI
        runner = CliRunner()
        for args in (["task", "show", handle.id], ["inspect"], ["jobs", "list"]):
            res = runner.invoke(main, [*args, "--redis", url])
            assert res.exit_code == 0, (args, res.output)
            assert RC_PASSWORD not in res.output
        worker_log, beat_log = worker.log(), beat.log()
        assert "rediss://rc:***@127.0.0.1" in worker_log
        assert "rediss://rc:***@127.0.0.1" in beat_log
    for text in (worker_log, beat_log):
        assert RC_PASSWORD not in text


def test_a_wrong_password_or_no_server_never_shows_the_password(server: TlsRedis) -> None:
    runner = CliRunner()
    wrong = server.url(password="Wr0ng-pass-xyz")
    res = runner.invoke(main, ["inspect", "--redis", wrong])
    assert res.exit_code == 1
    assert "Wr0ng-pass-xyz" not in res.output
    nowhere = server.url().replace(f":{server.port}/", ":1/")
    res = runner.invoke(main, ["inspect", "--redis", nowhere])
    assert res.exit_code == 1
    assert RC_PASSWORD not in res.output
    assert "rediss://rc:***@127.0.0.1:1/0" in res.output


def test_tls_needs_the_ca(server: TlsRedis) -> None:
    url = server.url().split("?")[0]  # no ssl_ca_certs: the self-signed CA is unknown
    res = CliRunner().invoke(main, ["inspect", "--redis", url])
    assert res.exit_code == 1
    assert "certificate verify failed" in res.output
    assert RC_PASSWORD not in res.output
    assert os.path.exists(server.ca)
