"""The W3C trace context an instance carries (redcron/tracing.py): enqueue.lua
and a fire (lib/run_create.lua) store ``traceparent`` and ``tracestate`` as
given, only when given, and lease.lua hands them back with the lease."""

from __future__ import annotations

from collections.abc import Iterator

import msgpack
import pytest
import redis
from lua_ops import Ops, new_id, row

from redcron import App
from redcron.engine import argv
from redcron.engine.argv import FireArgs
from redcron.errors import Rejected
from redcron.model.jobs import Task

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TS = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


def test_enqueue_stores_the_trace_context_given_and_lease_hands_it_back(
    ops: Ops, r: redis.Redis
) -> None:
    traced, plain, no_state = new_id(), new_id(), new_id()
    ops.enqueue(
        row(traced)._replace(traceparent=TP, tracestate=TS),
        row(plain),
        row(no_state)._replace(traceparent=TP),
    )
    assert r.hmget(ops.k.ti(0, traced), "traceparent", "tracestate") == [TP.encode(), TS.encode()]
    # off (no trace context): no field at all, as before
    assert not {b"traceparent", b"tracestate"} & set(r.hkeys(ops.k.ti(0, plain)))
    assert r.hmget(ops.k.ti(0, no_state), "traceparent", "tracestate") == [TP.encode(), None]
    leases = {x.iid: x for x in ops.b.leases.lease(0, "w1", 10, 60_000, ["default"])}
    assert (leases[traced].traceparent, leases[traced].tracestate) == (TP, TS)
    assert (leases[plain].traceparent, leases[plain].tracestate) == ("", "")
    assert (leases[no_state].traceparent, leases[no_state].tracestate) == (TP, "")


def test_enqueue_rejects_a_trace_context_that_is_not_text(ops: Ops, r: redis.Redis) -> None:
    fields = msgpack.unpackb(argv.enqueue_row(row(new_id())), raw=True)
    good = {k.decode(): v for k, v in fields.items()}
    bad = msgpack.packb({**good, "iid": new_id(), "traceparent": 7}, use_bin_type=False)
    with pytest.raises(Rejected, match="traceparent must be a string"):
        ops.run("enqueue", [ops.now, bad])


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    a.broker.ensure_meta()
    yield a
    a.close()


@pytest.mark.parametrize("traced", [True, False])
def test_a_fire_gives_its_trace_context_to_every_task_of_its_run(app: App, traced: bool) -> None:
    job_id = app.jobs.put(
        "dag",
        tasks={"a": Task("t"), "b": Task("t", depends_on=["a"])},
        tenant="acme",
        allow_unregistered=True,
    ).id
    context = (TP, TS) if traced else ("", "")
    fire = FireArgs(
        job_id, "", "", 1_700_000_040_000, None, None, "", "cron", 0, f"{job_id}@1", "", *context
    )
    status, run_id = app.broker.beat.fire_one(0, fire)
    assert status == "created"
    r, k = app.broker.client, app.broker.keys
    for task in ("a", "b"):  # b is pending: it carries the run's context all the same
        got = r.hmget(k.ti(0, f"{run_id}/{task}"), "traceparent", "tracestate")
        assert got == ([TP.encode(), TS.encode()] if traced else [None, None])
    [lease] = app.broker.leases.lease(0, "w1", 10, 60_000, ["default"])
    assert (lease.traceparent, lease.tracestate) == ((TP, TS) if traced else ("", ""))
