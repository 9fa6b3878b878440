"""The grant of command and container tasks (tenant setting ``allow_commands``,
DESIGN §8a), checked for a batch of jobs before any of them is written.

The scripts that write tasks (``job_put``, ``enqueue``, ``enqueue_check``)
and hand them out (``lease``) check it atomically, ``lua/lib/grant.lua``;
this module only lets :meth:`JobStore.put_many` refuse a whole batch up front.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from redcron.errors import Forbidden
from redcron.model.jobs import JobSpec, spec_json_full
from redcron.model.tenants import grant_refusal
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core


def check_job_grants(
    broker: Core,
    specs: Sequence[JobSpec],
    shards: Sequence[int],
    current: Sequence[Any],
    granted: set[tuple[int, str]],
    spec_json: Callable[[JobSpec], str],
) -> None:
    """Raise :class:`Forbidden` if a new or changed job has a command or container
    task and its tenant (``(shard, tenant)`` not in ``granted``) lacks the grant.

    ``current`` holds each spec's stored job id (None: new); an unchanged job
    passes, as in job_put.lua, so re-applying after a revoke is not an error.
    """
    refused = []
    for spec, shard, cur in zip(specs, shards, current, strict=True):
        kinds = [(t, task.kind) for t, task in spec.tasks.items() if task.kind != "python"]
        if kinds and (shard, spec.tenant) not in granted:
            refused.append((spec, shard, cur, kinds[0]))
    if not refused:
        return
    pipe = broker.client.pipeline(transaction=False)
    for _spec, shard, cur, _kind in refused:
        if cur:
            pipe.hget(broker.keys.job(shard, _s(cur)), "spec")
    stored = iter(pipe.execute())
    for spec, _shard, cur, (tname, kind) in refused:
        # an older release stored the spec in full (spec_json_full)
        if (
            cur
            and (raw := next(stored)) is not None
            and _s(raw)
            in (
                spec_json(spec),
                spec_json_full(spec),
            )
        ):
            continue  # unchanged: nothing is written
        raise Forbidden(grant_refusal(spec.tenant, f"job {spec.name}, task {tname} is a {kind}"))
