"""The dashboard on the cluster: every page, the /v1 lists and /metrics answer,
with work, a job, a worker and a dead task spread over the 12 shards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient
from test_cluster import tenants_on_every_shard  # tests/cluster
from worker_procs import thread_workers

from redcron import App, TaskFailed
from redcron.dashboard import create_app
from redcron.model.jobs import Task

ADMIN = "cluster-admin-token"


@pytest.fixture
def admin(capp: App) -> Iterator[FlaskClient]:
    web = create_app(capp, admin_token=ADMIN)
    client = web.test_client()
    assert client.get("/login").status_code == 200
    with client.session_transaction() as session:
        csrf = session["csrf_token"]
    resp = client.post("/login", data={"token": ADMIN, "csrf_token": csrf})
    assert resp.status_code == 303
    yield client


def test_pages_api_and_metrics_answer_on_the_cluster(capp: App, admin: FlaskClient) -> None:
    tenants = tenants_on_every_shard()
    capp.jobs.put("nightly", tenant=tenants[1], tasks={"t": Task("echo")}, cron="0 2 * * *")
    with thread_workers(capp) as start:
        start(concurrency=4)
        done = [capp.enqueue("echo", t, _tenant=t) for t in tenants]
        assert [h.result(timeout=30) for h in done] == tenants
        dead = capp.enqueue("permanent", _tenant=tenants[4])
        with pytest.raises(TaskFailed):
            dead.result(timeout=30)
        for path in ("/", "/jobs", "/workers", "/dlq", "/tenants", "/tasks"):
            resp = admin.get(path)
            assert resp.status_code == 200, (path, resp.get_data(as_text=True)[:500])
    headers = {"Authorization": f"Bearer {ADMIN}"}
    for path in ("/v1/jobs", "/v1/runs", f"/v1/tenants/{tenants[4]}",
                 f"/v1/tenants/{tenants[4]}/dlq", f"/v1/tasks/{dead.id}"):  # fmt: skip
        resp = admin.get(path, headers=headers)
        assert resp.status_code == 200, (path, resp.get_data(as_text=True)[:500])
    assert dead.id in admin.get("/dlq").get_data(as_text=True)
    metrics = admin.get("/metrics")
    assert metrics.status_code == 200
    assert "redcron_" in metrics.get_data(as_text=True)
