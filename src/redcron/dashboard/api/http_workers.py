"""HTTP workers as first-class workers: in the registry, and in the log.

The dashboard publishes an HTTP worker's entry in the worker registry on its
behalf (:class:`~redcron.engine.WorkerRegistry`, the hash a ``redcron worker``
keeps), so it shows in ``redcron workers list``, ``GET /v1/workers``, the
Workers page and ``redcron inspect`` as a Python worker does, marked ``via
http`` with the id of the token it leases with:

* on a lease call: its queues, the tenants its token may serve, its
  ``capacity.slots``, and what that call handed it (``running``, ``leased``).
  A worker that long-polls calls again at once, so this is re-published only
  when what it asks for changed, or at most every
  :data:`~redcron.engine.workers.LEASED_REPUBLISH_S` per dashboard process
  (as a Python worker re-publishes what it holds);
* on each heartbeat: the leases it renewed are what it runs (the entry's other
  fields as the last lease call left them).

The entry lives :data:`~redcron.engine.workers.TTL_LEASES` lease TTLs past the
call, plus the call's ``wait_s``: an HTTP worker never says goodbye, so a
stopped one drops out when its calls stop.

Each report (complete, fail) logs one INFO line on the worker logger, the line
``redcron worker`` writes per attempt (``docs/operations.md``, Logs), with the
duration the attempt's record holds (started, or leased, to ended: server clock).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import flask

from redcron.clock import span
from redcron.engine import (
    LEASED_REPUBLISH_S,
    TRANSIENT,
    TTL_LEASES,
    Broker,
    FailResult,
    Lease,
    Registration,
    WorkerRegistry,
)
from redcron.errors import NotFound

# the worker's logger, as the Python worker's line is written on
log = logging.getLogger("redcron.worker.worker")

#: what an HTTP worker's registry entry says of its version: its User-Agent, cut
MAX_AGENT = 64
#: HTTP workers one dashboard process remembers publishing (the oldest forgotten first)
MAX_REMEMBERED = 10_000
#: ``flask.current_app.extensions`` key of the publication memory
MEMORY = "redcron.http_workers"
#: why a reported attempt's record may not be read for its line
_UNREAD: tuple[type[Exception], ...] = (*TRANSIENT, NotFound)


class _Published:
    """When each HTTP worker was last published by this process, and with what."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: dict[str, tuple[float, tuple[Any, ...], tuple[str, ...]]] = {}

    def due(
        self, worker: str, static: tuple[Any, ...], leased: tuple[str, ...], ttl_s: float
    ) -> bool:
        """Publish now?  Yes when first seen or ``static`` changed; else when what it
        holds changed and :data:`LEASED_REPUBLISH_S` has passed, or a third of the
        entry's life has (so a worker that only leases never lapses)."""
        now = time.monotonic()
        with self.lock:
            seen = self.last.get(worker)
            if seen is not None:
                at, was, held = seen
                wait = LEASED_REPUBLISH_S if held != leased else ttl_s / 3
                if was == static and now - at < min(wait, ttl_s / 3):
                    return False
            self.last.pop(worker, None)
            self.last[worker] = (now, static, leased)
            while len(self.last) > MAX_REMEMBERED:
                del self.last[next(iter(self.last))]
            return True


def _memory() -> _Published:
    ext = flask.current_app.extensions
    got = ext.get(MEMORY)
    if got is None:
        got = ext.setdefault(MEMORY, _Published())
    assert isinstance(got, _Published)
    return got


def _agent() -> str:
    agent = flask.request.headers.get("User-Agent", "")
    text = "".join(c for c in agent if c.isascii() and c.isprintable())[:MAX_AGENT]
    return f"http {text}".strip()


def entry_ttl_ms(lease_ttl_ms: int, wait_s: float = 0.0) -> int:
    """How long an HTTP worker's entry lives past its call."""
    return TTL_LEASES * lease_ttl_ms + round(wait_s * 1000)


def on_lease(
    broker: Broker,
    worker: str,
    token: str,
    queues: Sequence[str],
    tenants: Sequence[str],
    slots: int,
    got: Sequence[Lease],
    lease_ttl_ms: int,
    wait_s: float,
) -> None:
    """Publish the worker that made a lease call (when due, see the module)."""
    host = flask.request.remote_addr or ""
    static = (host, token, tuple(queues), tuple(tenants), slots)
    leased = tuple(x.iid for x in got)
    ttl_ms = entry_ttl_ms(lease_ttl_ms, wait_s)
    if not _memory().due(worker, static, leased, ttl_ms / 1000):
        return
    registry = WorkerRegistry(broker)
    held_by = registry.get(worker)
    if held_by is not None and (held_by.via != "http" or held_by.token != token):
        # a worker id another token (or a Python worker) is publishing: a caller
        # may not overwrite what the registry shows of someone else's worker
        log.warning(
            "worker %s: not published for token %s: the id is in use by another worker",
            worker,
            token,
        )
        return
    reg = Registration(
        id=worker,
        host=host,
        pid=0,
        queues=tuple(queues),
        tenants=tuple(tenants),
        slots=slots,
        running=len(got),
        tasks=(),
        version=_agent(),
        leased=leased,
        via="http",
        token=token,
    )
    registry.publish(reg, ttl_ms)


def on_heartbeat(broker: Broker, worker: str, held: Sequence[str], lease_ttl_ms: int) -> None:
    """Renew the entry of a worker that heartbeated ``held`` (task ids it still
    runs); one never published by a lease call (expired, or leased before its
    entry existed) is left for its next lease call."""
    registry = WorkerRegistry(broker)
    info = registry.get(worker)
    if info is None or info.via != "http":
        return
    reg = Registration(
        id=info.id,
        host=info.host,
        pid=info.pid,
        queues=info.queues,
        tenants=info.tenants,
        slots=info.slots,
        running=len(held),
        tasks=info.tasks,
        version=info.version,
        leased=tuple(held),
        via="http",
        token=info.token,
    )
    registry.publish(reg, entry_ttl_ms(lease_ttl_ms))


def log_report(
    broker: Broker,
    worker: str,
    task_id: str,
    reported: str,
    result: FailResult,
    error: str = "",
) -> None:
    """The INFO line of one reported attempt (``result.state`` None: the lease was
    lost, nothing recorded), from the attempt's record in Redis; ``reported`` is
    the outcome the worker reported (succeeded, failed)."""
    if not log.isEnabledFor(logging.INFO):
        return
    try:
        record = broker.inspection.task_info(task_id)
    except _UNREAD:  # written (or not) already: the line is not worth a 503
        log.info("task %s: %s reported by http worker %s", task_id, reported, worker)
        return
    n = record.attempt
    mine = next((a for a in record.attempts if a.number == n and a.worker == worker), None)
    began = None if mine is None else mine.started_at or mine.leased_at
    took = (
        None
        if mine is None or began is None or mine.ended_at is None
        else max(0, round((mine.ended_at - began).total_seconds() * 1000))
    )
    ok = result.state == "succeeded"
    fields: dict[str, Any] = {
        "task_id": task_id,
        "task": record.name,
        "tenant": record.tenant,
        "queue": record.queue,
        "attempt": n,
        "max_attempts": record.max_attempts,
        # a lost lease's record is another attempt's by now: say what was reported
        "outcome": (mine.outcome if mine is not None and result.state else None) or reported,
        "duration_ms": took,
        "state": result.state,
        "worker": worker,
        "via": "http",
    }
    head = "task %s %s (tenant %s, queue %s) attempt %d/%d %s %s (http worker %s)"
    args: list[Any] = [
        fields["task"],
        task_id,
        fields["tenant"],
        fields["queue"],
        n,
        record.max_attempts,
        fields["outcome"],
        "in ?" if took is None else f"in {span(took)}",
        worker,
    ]
    if result.state is None:
        log.info(head + ": lease lost, not recorded", *args, extra=fields)
    elif ok:
        log.info(head, *args, extra=fields)
    else:
        last = (error.strip().splitlines() or [""])[-1][:200]
        fields.update(error=last, retry_in_ms=result.retry_in_ms)
        if result.retry_in_ms is not None:
            then = f"retry in {span(result.retry_in_ms)}"
        elif result.state == "dead":
            then = "dead-lettered"
        else:
            then = result.state
        log.info(head + ": %s; %s", *args, last, then, extra=fields)
