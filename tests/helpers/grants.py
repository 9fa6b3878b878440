"""Grant tenants command and container tasks (the tenant setting
``allow_commands``, DESIGN §8a) for tests that create such tasks.

Written straight into the tenant hash, as ``redcron tenants set T
--allow-commands`` stores it (docs/keys.md), so that a test states its grant
in one line and the tests of the grant itself can run against code that
predates it."""

from __future__ import annotations

from typing import Any

from redcron.keys import shard_of

DEFAULT_TENANT = "default"


def grant_commands(app: Any, *tenants: str, granted: bool = True) -> None:
    """Grant (or, ``granted=False``, revoke) command tasks to ``tenants``
    (default: the ``default`` tenant) of ``app`` (an App or a Broker)."""
    broker = getattr(app, "broker", app)
    for tenant in tenants or (DEFAULT_TENANT,):
        key = broker.keys.tenant(shard_of(tenant, broker.shards), tenant)
        broker.client.hset(key, "allow_commands", "1" if granted else "0")
