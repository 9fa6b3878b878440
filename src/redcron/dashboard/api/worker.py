"""``/v1/worker``: the HTTP worker protocol, so a worker can be written in any language.

A worker leases attempts, heartbeats them while they run, and reports each
one complete or failed.  The routes call the same broker methods (and so the
same Lua scripts and fencing) as the Python worker: a lease is the token
(task id, epoch, worker id, shard), handed out as one signed ``lease_id``
(``leases.py``) that only the token which leased it may report on (else 403),
and a report on a lease that is no longer held writes nothing and answers 409.
A long poll whose client has gone takes nothing, and leases whose reply could
not be written go back at once without using an attempt (``connection.py``).

Payloads cross as JSON; in Redis they stay msgpack (``redcron.serde``).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import flask

from redcron import serde
from redcron.dashboard.api import auth, http_workers, leases, worker_progress
from redcron.dashboard.api.common import ApiError, bad, body, only, redcron_app, reply
from redcron.dashboard.api.connection import UnlessSent, client_gone
from redcron.dashboard.api.leases import LEASE_ID_SCHEMA, WORKER_ID, LeaseToken
from redcron.dashboard.api.operation import Operation, Routes, link
from redcron.dashboard.api.params import Json, body_schema
from redcron.dashboard.api.record_schema import ref
from redcron.engine import TRANSIENT, Broker, FailItem, FailResult, Lease
from redcron.keys import run_of_task
from redcron.model import edges, validation
from redcron.model.edges import RunInputs
from redcron.model.serialize import plain

log = logging.getLogger(__name__)

bp = Routes("worker", __name__, url_prefix="/worker")

#: the longest a lease request may block waiting for work (a held HTTP thread)
MAX_WAIT_S = 30.0
#: the most attempts one lease request may take (the broker's batch bound)
MAX_SLOTS = 256
#: the most leases one heartbeat may name
MAX_HEARTBEAT = 1024
#: how long one wait on the wake lists lasts before the lease is tried again
#: (a wake-up can be missed between a lease and the wait: this bounds the cost)
POLL_S = 1.0

_rotation = itertools.count()

#: second meanings of 409 and 403 on the routes that name a lease
LEASE_409 = "The lease is no longer held (cancelled, reaped or superseded); nothing was written"
LEASE_403 = ("The lease_id is not genuine (altered, made up, or signed by another deployment) "
             "or was leased with another token; nothing was written")  # fmt: skip
RESULT_413 = ("Body over the size limit (MAX_CONTENT_LENGTH), or a result over "
              "max_result_bytes (code result_too_large): then the attempt was recorded "
              "failed, not retried")  # fmt: skip
_LEASE = {"lease_id": "$response.body#/0/lease_id"}
#: what a worker does next with the attempts it leased
LEASE_LINKS: Json = {
    "Heartbeat": link("worker_heartbeat", body={"worker_id": "$request.body#/worker_id",
                                                "lease_ids": ["$response.body#/0/lease_id"]}),
    "Complete": link("worker_complete", body=_LEASE),
    "Fail": link("worker_fail", body=_LEASE),
}  # fmt: skip

_WORKER_ID_SCHEMA: Json = {"type": "string", "pattern": validation.anchored(WORKER_ID)}
#: the bodies the routes take, as ``GET /v1/openapi.json`` shows them; each route
#: refuses a field not in its schema's properties (``only``)
CAPACITY: Json = body_schema(
    {
        "slots": {"type": "integer", "minimum": 1, "maximum": MAX_SLOTS, "default": 1},
        "cpu": {"anyOf": [validation.cpus_schema(), {"type": "null"}]},
        "mem": {"anyOf": [validation.mem_schema(), {"type": "null"}]},
    }
)
LEASE_BODY: Json = body_schema(
    {
        "worker_id": _WORKER_ID_SCHEMA,
        "capacity": CAPACITY,
        "queues": {
            "type": "array",
            "minItems": 1,
            "items": validation.name_schema(),
            "default": ["default"],
        },
        "wait_s": {**validation.number_schema(maximum=MAX_WAIT_S), "default": 0},
    },
    ("worker_id",),
)
COMPLETE_BODY: Json = body_schema(
    {
        "lease_id": LEASE_ID_SCHEMA,
        "result": {"description": "any JSON (stored as msgpack: integers within 64 bits)"},
    },
    ("lease_id",),
)
HEARTBEAT_BODY: Json = body_schema(
    {
        "worker_id": _WORKER_ID_SCHEMA,
        "lease_ids": {"type": "array", "maxItems": MAX_HEARTBEAT, "items": LEASE_ID_SCHEMA},
        "progress": {
            "type": "object",
            "propertyNames": LEASE_ID_SCHEMA,
            "additionalProperties": body_schema(worker_progress.VALUE, ("done",)),
            "description": "optional: lease_id -> progress of that attempt (as POST "
            "/v1/worker/progress), stored for the leases this call renewed (answered ok); "
            "the others' is dropped",
        },
    },
    ("worker_id", "lease_ids"),
)
FAIL_BODY: Json = body_schema({
    "lease_id": LEASE_ID_SCHEMA,
    "error": {"type": "string", "default": ""},
    "retryable": {"type": "boolean", "default": True},
    "exit_code": {"type": ["integer", "null"]},
    "retry_in_s": {"anyOf": [validation.seconds_schema(), {"type": "null"}]},
}, ("lease_id",))  # fmt: skip


def _worker_id(data: dict[str, Any]) -> str:
    value = data.get("worker_id")
    if not isinstance(value, str) or not WORKER_ID.fullmatch(value):
        bad("worker_id", "must be 1-128 letters, digits or '_ . : @ -' (unique per worker)")
    return value


def _allowed() -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """The queues and tenants a worker token may lease from (None: any)."""
    who = auth.current()
    return (who.queues, who.tenants) if who.kind == "worker" else (None, None)


@dataclass(frozen=True, slots=True)
class _Ask:
    """A lease request, checked."""

    worker: str
    slots: int
    cpu: float | None
    mem: int | None
    queues: tuple[str, ...]
    tenants: tuple[str, ...]
    wait_s: float


def _lease_request(data: dict[str, Any]) -> _Ask:
    only(data, LEASE_BODY["properties"])
    worker = _worker_id(data)
    capacity = data.get("capacity", {})
    if not isinstance(capacity, dict):
        bad("capacity", "must be an object {slots, cpu, mem}")
    unknown = sorted(set(capacity) - set(CAPACITY["properties"]))
    if unknown:
        known = ", ".join(sorted(CAPACITY["properties"]))
        bad(f"capacity.{unknown[0]}", f"unknown field; known: {known}")
    slots = capacity.get("slots", 1)
    if isinstance(slots, float) and slots.is_integer():
        slots = int(slots)  # JSON's 2.0 is 2 (validation.whole_number)
    if not isinstance(slots, int) or isinstance(slots, bool) or not 1 <= slots <= MAX_SLOTS:
        bad("capacity.slots", f"must be a whole number 1..{MAX_SLOTS}")
    cpu = None if capacity.get("cpu") is None else validation.cpus(capacity["cpu"], "capacity.cpu")
    mem = (
        None
        if capacity.get("mem") is None
        else validation.mem_bytes(capacity["mem"], "capacity.mem")
    )
    queues = data.get("queues", ["default"])
    if not isinstance(queues, list) or not queues:
        bad("queues", "must be a non-empty list of queue names")
    queues = tuple(dict.fromkeys(validation.name("queues", q) for q in queues))
    wait_s = validation.number(data.get("wait_s", 0), "wait_s")
    if wait_s > MAX_WAIT_S:
        bad("wait_s", f"{wait_s:g} is over the limit of {MAX_WAIT_S:g} seconds; poll again instead")
    allowed_queues, allowed_tenants = _allowed()
    if allowed_queues is not None:
        refused = [q for q in queues if q not in allowed_queues]
        if refused:
            raise ApiError(
                403,
                "forbidden",
                f"this worker token may not lease from queue {refused[0]!r}",
                "queues",
            )
    return _Ask(worker, slots, cpu, mem, queues, allowed_tenants or (), wait_s)


def _leased(
    lease: Lease, worker: str, ttl_ms: int, leaser: str, inputs: RunInputs | None = None
) -> dict[str, Any]:
    """One lease as the worker sees it: JSON args, the command for a command
    task, and for a task of a run its upstream results (``ctx.upstream``)."""
    token = LeaseToken(lease.shard, lease.iid, lease.epoch, worker, leaser)
    run_id, _, task_name = lease.iid.rpartition("/")
    payload = serde.loads(lease.args)
    item: dict[str, Any] = {
        "lease_id": token.encode(),
        "task_id": lease.iid,
        "kind": lease.kind,
        "attempt": lease.attempt,
        "max_attempts": lease.max_attempts,
        "timeout_s": lease.timeout_ms / 1000 if lease.timeout_ms else None,
        "ttl_s": ttl_ms / 1000,
        # stable across attempts, as ctx.idem_key is for a Python task
        "idem_key": f"{run_id}:{task_name}" if run_id else lease.iid,
        "tenant": lease.tenant,
        "queue": lease.queue,
        # the W3C trace context of the enqueue or fire (null: not traced), the
        # parent of the worker's own span (docs/observability.md)
        "traceparent": lease.traceparent or None,
        "tracestate": lease.tracestate or None,
    }
    if inputs is not None:
        item["upstream"] = plain(inputs.upstream)
    if lease.kind == "python":
        args, kwargs = payload if isinstance(payload, list | tuple) else ([], {})
        item.update(name=lease.name, args=list(args), kwargs=dict(kwargs))
    elif lease.kind == "command":
        payload = payload or {}
        item.update(
            command=list(payload.get("argv") or []),
            env=dict(payload.get("env") or {}),
            cwd=payload.get("cwd"),
        )
    else:  # a container: the image and its options, for a worker that runs them
        item.update(container=payload or {})
    return item


@bp.post(
    "/lease",
    doc=Operation(
        "worker_lease",
        "Lease attempts to run (HTTP worker); long-polls up to wait_s",
        {"type": "array", "items": ref("WorkerLease")},
        body=ref("WorkerLeaseBody"),
        links=LEASE_LINKS,
    ),
)
def lease() -> flask.Response:
    """Lease up to ``capacity.slots`` attempts; wait up to ``wait_s`` for the first.

    Before each round the client's connection is checked: a client that hung
    up mid-wait is leased nothing (the wake-up it was woken by goes on to
    another worker), and leases whose reply cannot be written are handed back.
    """
    ask = _lease_request(body())
    broker = redcron_app().broker
    ttl_ms = int(broker.settings.lease_ttl * 1000)
    shards = list(range(broker.shards))
    environ = flask.request.environ

    def gone() -> bool:
        return client_gone(environ)

    deadline = time.monotonic() + ask.wait_s
    while True:
        if gone():
            log.info("lease request of worker %s: the client left; nothing leased", ask.worker)
            return reply([])  # nobody reads it
        got = _lease_round(ask, shards, ttl_ms)
        left = deadline - time.monotonic()
        if got or left <= 0:
            _register(broker, ask, got, ttl_ms)
            return _handed_out(broker, ask, got, ttl_ms, gone)
        broker.leases.wait_for_work(shards, ask.queues, min(left, POLL_S), pass_on=gone)


def _register(broker: Broker, ask: _Ask, got: Sequence[Lease], ttl_ms: int) -> None:
    """Publish the worker in the registry (``http_workers.py``): best effort, as
    a Python worker's publication is (its next call publishes it again)."""
    try:
        http_workers.on_lease(
            broker, ask.worker, leases.leaser(), ask.queues, ask.tenants, ask.slots, got,
            ttl_ms, ask.wait_s,
        )  # fmt: skip
    except TRANSIENT as exc:
        log.warning("worker %s: could not publish it in the worker registry (%s)", ask.worker, exc)


def _handed_out(
    broker: Broker, ask: _Ask, got: list[Lease], ttl_ms: int, gone: Callable[[], bool]
) -> flask.Response:
    """The reply carrying ``got``; the leases go back if it never reaches the client."""
    if not got:
        return reply([])

    def hand_back() -> None:
        _hand_back(broker, ask.worker, got)

    if gone():  # left while the round ran
        hand_back()
        return reply([])
    by = leases.leaser()
    try:
        inputs = _inputs(broker, got)
    except TRANSIENT:  # Redis went away since the lease: nobody runs these now
        hand_back()
        raise
    response = reply([_leased(x, ask.worker, ttl_ms, by, inputs.get(x.iid)) for x in got])
    # the server closes the body without writing it all when the client is gone
    # (waitress: its write raises); then the leases go back, their attempts unused
    response.response = UnlessSent([response.get_data()], hand_back)
    return response


def _inputs(broker: Broker, got: Sequence[Lease]) -> dict[str, RunInputs]:
    """The upstream results of the leased tasks of runs, by task id: one script
    call per shard (``inputs.lua``, beside the lease rather than inside it:
    ``lease.lua`` stays within the engine's weight)."""
    by_shard: dict[int, list[str]] = {}
    for x in got:
        if run_of_task(x.iid):
            by_shard.setdefault(x.shard, []).append(x.iid)
    out: dict[str, RunInputs] = {}
    for shard, iids in by_shard.items():
        out.update(zip(iids, broker.inspection.run_inputs(shard, iids), strict=True))
    return out


def _hand_back(broker: Broker, worker: str, got: Sequence[Lease]) -> None:
    """Release leases no client received: they run again at once, budget kept.
    Best effort: a lease not handed back expires as a lost worker's does."""
    by_shard: dict[int, list[tuple[str, str]]] = {}
    for item in got:
        by_shard.setdefault(item.shard, []).append((item.iid, item.epoch))
    for shard, tokens in by_shard.items():
        try:
            n = broker.leases.release(shard, worker, tokens)
        except TRANSIENT as exc:
            log.warning(
                "worker %s left before its %d leases were sent and they could not be "
                "handed back (%s); they expire",
                worker,
                len(tokens),
                exc,
            )
        else:
            log.info("worker %s left before its leases were sent: %d handed back", worker, n)


def _lease_round(ask: _Ask, shards: Sequence[int], ttl_ms: int) -> list[Lease]:
    """One pass over the shards (from a rotating start), within the capacity asked for."""
    broker = redcron_app().broker
    start = next(_rotation)
    free, cpu, mem = ask.slots, ask.cpu, ask.mem
    got: list[Lease] = []
    for i in range(len(shards)):
        if free <= 0:
            break
        shard = shards[(start + i) % len(shards)]
        leases = broker.leases.lease(
            shard, ask.worker, free, ttl_ms, ask.queues, ask.tenants, (cpu, mem)
        )
        if not leases:
            continue
        # the attempt is handed to a worker that starts it at once: mark it running
        broker.leases.start(shard, ask.worker, [(x.iid, x.epoch) for x in leases])
        got += leases
        free -= len(leases)
        cpu = None if cpu is None else max(0.0, cpu - sum(x.cpu for x in leases))
        mem = None if mem is None else max(0, mem - sum(x.mem for x in leases))
    return got


@bp.post(
    "/heartbeat",
    doc=Operation(
        "worker_heartbeat",
        "Renew leases: each answers ok, revoked (cancelled) or lost",
        {"type": "object", "additionalProperties": {"enum": ["ok", "revoked", "lost"]}},
        errors=(("403", LEASE_403),),
        body=ref("WorkerHeartbeatBody"),
    ),
)
def heartbeat() -> flask.Response:
    """Renew leases: each answers ``ok``, ``revoked`` (cancel requested: stop the
    attempt and report it failed) or ``lost`` (the lease is gone: stop, report nothing)."""
    data = body()
    only(data, HEARTBEAT_BODY["properties"])
    worker = _worker_id(data)
    ids = data.get("lease_ids")
    if not isinstance(ids, list) or len(ids) > MAX_HEARTBEAT:
        bad("lease_ids", f"must be a list of up to {MAX_HEARTBEAT} lease_id strings")
    tokens = {lease_id: leases.verify(lease_id, "lease_ids") for lease_id in ids}
    for token in tokens.values():
        if token.worker != worker:
            bad("lease_ids", f"a lease of task {token.task_id} was given to another worker")
    told = worker_progress.parse_field(data["progress"]) if "progress" in data else {}
    broker = redcron_app().broker
    ttl_ms = int(broker.settings.lease_ttl * 1000)
    by_shard: dict[int, dict[str, str]] = {}
    for token in tokens.values():
        # one epoch per task: heartbeat.lua answers by task id
        seen = by_shard.setdefault(token.shard, {}).get(token.task_id)
        if seen is None or int(token.epoch) > int(seen):
            by_shard[token.shard][token.task_id] = token.epoch
    answers: dict[tuple[str, str], str] = {}
    for shard, epochs in by_shard.items():
        lost, revoked = broker.leases.heartbeat(shard, worker, ttl_ms, list(epochs.items()))
        for iid, epoch in epochs.items():
            answers[(iid, epoch)] = "lost" if iid in lost else "revoked" if iid in revoked else "ok"
    held = [iid for (iid, _epoch), said in answers.items() if said == "ok"]
    if told:
        worker_progress.store(broker, worker, tokens, told, answers)
    try:
        http_workers.on_heartbeat(broker, worker, held, ttl_ms)
    except TRANSIENT as exc:
        log.warning("worker %s: could not renew it in the worker registry (%s)", worker, exc)
    return reply(
        {
            lease_id: answers.get((token.task_id, token.epoch), "lost")  # an older epoch
            for lease_id, token in tokens.items()
        }
    )


@bp.post(
    "/progress",
    doc=Operation(
        "worker_progress",
        "Say how far a running attempt is (shown by the task's page and GET /v1/tasks/{id})",
        ref("WorkerProgress"),
        errors=(("403", LEASE_403), ("409", LEASE_409)),
        body=ref("WorkerProgressBody"),
    ),
)
def report_progress() -> flask.Response:
    """Store ``done`` of ``total`` and a ``message`` on the leased task, fenced as a
    report is: a lease no longer held writes nothing (409).  Each call is one
    write: a worker that reports in a loop should send at most one a heartbeat
    (the Python worker's rule, docs/http-worker.md)."""
    data = body()
    only(data, worker_progress.BODY["properties"])
    token = leases.verify(data.get("lease_id"))
    value = worker_progress.parse_body(data)
    broker = redcron_app().broker
    (stored,) = broker.leases.progress(
        token.shard, token.worker, [(token.task_id, token.epoch, worker_progress.pending(value))]
    )
    if not stored:
        _lost(token)
    return reply({"task_id": token.task_id, **value.row()})


@bp.post(
    "/complete",
    doc=Operation(
        "worker_complete",
        "Report an attempt done",
        ref("WorkerReport"),
        errors=(("403", LEASE_403), ("409", LEASE_409), ("413", RESULT_413)),
        body=ref("WorkerCompleteBody"),
    ),
)
def complete() -> flask.Response:
    """Report an attempt done with its ``result`` (any JSON, stored as msgpack)."""
    data = body()
    only(data, COMPLETE_BODY["properties"])
    token = leases.verify(data.get("lease_id"))
    result = serde.dumps(data.get("result"), field="result")
    broker = redcron_app().broker
    too_large = edges.result_too_large(len(result), broker.settings.max_result_bytes)
    if too_large is not None:
        _fail_too_large(broker, token, too_large)
    (done,) = broker.leases.complete(
        token.shard, token.worker, [(token.task_id, token.epoch, result)]
    )
    outcome = FailResult("succeeded" if done else None)
    http_workers.log_report(broker, token.worker, token.task_id, "succeeded", outcome)
    if not done:
        _lost(token)
    return reply({"task_id": token.task_id, "state": "succeeded"})


@bp.post(
    "/fail",
    doc=Operation(
        "worker_fail",
        "Report an attempt failed (retried or dead-lettered)",
        ref("WorkerReport"),
        errors=(("403", LEASE_403), ("409", LEASE_409)),
        body=ref("WorkerFailBody"),
    ),
)
def fail() -> flask.Response:
    """Report an attempt failed: retried (with backoff) while ``retryable`` and attempts
    are left, else dead-lettered; a cancelled task ends cancelled."""
    data = body()
    only(data, FAIL_BODY["properties"])
    token = leases.verify(data.get("lease_id"))
    error = data.get("error", "")
    if not isinstance(error, str):
        bad("error", "must be a string saying what went wrong")
    retryable = data.get("retryable", True)
    if not isinstance(retryable, bool):
        bad("retryable", "must be true or false")
    exit_code = data.get("exit_code")
    if isinstance(exit_code, float) and exit_code.is_integer():
        exit_code = int(exit_code)
    if exit_code is not None and (not isinstance(exit_code, int) or isinstance(exit_code, bool)):
        bad("exit_code", "must be a whole number or null")
    delay = data.get("retry_in_s")
    delay_ms = None if delay is None else validation.delay_ms(delay, "retry_in_s")
    item = FailItem(
        token.task_id, token.epoch, "failed", error[:8192], retryable, delay_ms, exit_code
    )
    broker = redcron_app().broker
    (result,) = broker.leases.fail(token.shard, token.worker, [item])
    http_workers.log_report(broker, token.worker, token.task_id, "failed", result, error)
    if result.state is None:
        _lost(token)
    return reply(
        {
            "task_id": token.task_id,
            "state": result.state,
            "retry_in_s": None if result.retry_in_ms is None else result.retry_in_ms / 1000,
        }
    )


def _fail_too_large(broker: Broker, token: LeaseToken, error: str) -> NoReturn:
    """A result over ``max_result_bytes`` fails its attempt, permanently (as a
    Python task's does), and the report answers 413 saying so."""
    item = FailItem(token.task_id, token.epoch, "failed", error, False, None, None)
    (result,) = broker.leases.fail(token.shard, token.worker, [item])
    http_workers.log_report(broker, token.worker, token.task_id, "failed", result, error)
    if result.state is None:
        _lost(token)
    raise ApiError(
        413,
        "result_too_large",
        f"{error}; the attempt was recorded failed, not retried (task state {result.state})",
        "result",
    )


def _lost(token: LeaseToken) -> NoReturn:
    raise ApiError(
        409,
        "lease_lost",
        f"the lease on task {token.task_id} (epoch {token.epoch}) is no longer held "
        "(cancelled, reaped after missed heartbeats, or superseded); nothing was written",
        "lease_id",
    )
