"""A CONSUMER span per attempt, as a hook (docs/observability.md).

The span starts on the slot's thread just before the task body runs and ends
once it returned (``before_attempt`` / ``after_attempt``), current in
between: what the task enqueues continues its trace, and its ``ctx.logger``
records carry its ids (:class:`redcron.tracing.TraceFields`).  Its parent is
the producer context the instance carries (the enqueue's or the fire's span),
and it is linked to it too: the messaging conventions require the link (a batch
consumer could have no single parent) and allow the parent for one message at
a time, which an attempt is, so the whole trace from enqueue to attempt reads
as one tree; every attempt of a task (retries) is a child of the same producer.

The worker adds this hook only when tracing is on when it starts
(:func:`redcron.tracing.tracer`): off, no attempt pays for it.
"""

from __future__ import annotations

from typing import Any

from redcron import tracing
from redcron.worker.execute import Attempt, Outcome
from redcron.worker.hooks import AttemptHook

#: the loggers whose records carry the current span's ids: the tasks'
TASK_LOGGER = "redcron.task"


class Tracing(AttemptHook):
    """The CONSUMER span ``<queue> process`` of each attempt.

    Attributes (OpenTelemetry messaging conventions, and redcron's own):
    ``messaging.system`` (``redcron``), ``messaging.destination.name`` (the
    queue), ``messaging.operation.type`` and ``messaging.operation``
    (``process``), ``messaging.message.id`` (the instance id),
    ``messaging.message.conversation_id`` (the run id, for a run's task),
    ``redcron.tenant``, ``redcron.task``, ``redcron.attempt`` and, once it
    ended, ``redcron.outcome``; a failed or timed-out attempt has an
    ``exception`` event and status ERROR.
    """

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        tracing.stamp_logger(TASK_LOGGER)

    def before_attempt(self, attempt: Attempt) -> None:
        lease = attempt.lease
        attributes: dict[str, Any] = {
            "messaging.system": tracing.SYSTEM,
            "messaging.destination.name": lease.queue,
            "messaging.operation.type": "process",
            "messaging.operation": "process",
            "messaging.message.id": lease.iid,
            "redcron.tenant": lease.tenant,
            "redcron.task": lease.name,
            "redcron.attempt": lease.attempt,
        }
        run_id = lease.iid.rpartition("/")[0]
        if run_id:
            attributes["messaging.message.conversation_id"] = run_id
        span = tracing.start_consumer(
            self.tracer, f"{lease.queue} process", attributes, lease.traceparent, lease.tracestate
        )
        attempt.trace = span
        attempt.trace_token = tracing.attach(span)

    def after_attempt(self, attempt: Attempt, outcome: Outcome) -> None:
        span = attempt.trace
        if span is None:
            return
        if attempt.trace_token is not None:
            tracing.detach(attempt.trace_token)
            attempt.trace_token = None
        # a thread abandoned at its timeout returns late: the worker reported it timed out
        ended = "timed_out" if attempt.kill_reason == "timed_out" else outcome.outcome
        span.set_attribute("redcron.outcome", ended)
        if outcome.exit_code is not None:
            span.set_attribute("process.exit.code", outcome.exit_code)
        if ended in ("failed", "timed_out"):
            error = outcome.error if ended == outcome.outcome else ""
            tracing.record_failure(span, ended, error or f"{ended}: the worker ended the attempt")
        span.end()
