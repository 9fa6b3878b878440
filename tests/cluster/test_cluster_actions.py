"""The audit trail on the cluster: each tenant's actions stream lives in its
shard's slot, the deployment's in its own; a state-changing request of every
shard's tenant is recorded in both, and a tenant reads only its own."""

from __future__ import annotations

from test_cluster import tenants_on_every_shard  # tests/cluster

from redcron import App
from redcron.dashboard import create_app
from redcron.keys import shard_of
from redcron.model.jobs import Task
from redcron.store import ActionLog
from redcron.store.tokens import TokenStore

ADMIN = "cluster-admin-token"


def test_actions_of_every_shard_are_recorded_and_isolated(capp: App) -> None:
    tenants = tenants_on_every_shard()
    web = create_app(capp, admin_token=ADMIN)
    client = web.test_client()
    headers = {"Authorization": f"Bearer {ADMIN}"}
    for tenant in tenants:
        job = capp.jobs.put("nightly", tenant=tenant, tasks={"t": Task("echo")}, cron="0 2 * * *")
        resp = client.post(f"/v1/jobs/{job.id}/pause", headers=headers)
        assert resp.status_code == 200, resp.get_data(as_text=True)
    log = ActionLog(capp.broker)
    every = log.page(limit=500).actions
    assert sorted(a.tenant or "" for a in every) == sorted(tenants)
    for tenant in tenants:
        shard = shard_of(tenant, capp.broker.shards)
        assert f"{{s{shard}}}" in capp.broker.keys.actions(shard, tenant)
        (own,) = log.page(tenant).actions
        assert own.tenant == tenant and own.action == "job.pause"
        assert own.id in {a.id for a in every}  # one action, one id in both streams
    token = TokenStore(capp.broker).create_tenant(tenants[3], "viewer")[1]
    viewer = {"Authorization": f"Bearer {token}"}
    listed = client.get("/v1/audit", headers=viewer).get_json()["actions"]
    assert [a["tenant"] for a in listed] == [tenants[3]]
