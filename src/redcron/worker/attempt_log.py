"""The INFO line per reported attempt, as a hook (docs/operations.md, Logs)."""

from __future__ import annotations

import logging
import time
from typing import Any

from redcron import tracing
from redcron.clock import span
from redcron.worker.execute import Attempt
from redcron.worker.hooks import AttemptHook, Reports

# the worker's logger: operators and tests filter on it, wherever the line is written
log = logging.getLogger("redcron.worker.worker")


class AttemptLog(AttemptHook):
    """A line per reported attempt: what ran, how it ended, where the task went.

    The fields also travel as the record's attributes (``extra``), so that
    ``--log-format json`` carries them as keys; with tracing on, the attempt's
    span's ``trace_id`` and ``span_id`` too (the text format appends them).

    The lines of one batch are one report's: their records are copies of one
    record made for the batch (its time, thread and process), each with its own
    message and fields, handed to the logger's handlers as ``log.info`` would.
    Making a record from scratch (``LogRecord()``, the caller's frame looked
    up) cost about half of each line, on the worker's hot path.
    """

    def after_report(self, reports: Reports) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        # the record factory's (logging.setLogRecordFactory), as log.info's would be
        first = log.makeRecord(log.name, logging.INFO, __file__, 0, "", (), None, "after_report")
        base, kind = vars(first), type(first)
        new, handle = _new_record, log.handle
        for attempt, out, state, retry_in_ms in reports:
            lease = attempt.lease
            took = took_ms(attempt)
            record = new(kind)
            fields = record.__dict__
            fields.update(base)
            fields.update(
                task_id=lease.iid,
                task=lease.name,
                tenant=lease.tenant,
                queue=lease.queue,
                attempt=lease.attempt,
                max_attempts=lease.max_attempts,
                outcome=out.outcome,
                duration_ms=took,
            )
            if attempt.trace is not None:  # tracing on: the attempt's span (docs/observability.md)
                traced = tracing.ids(attempt.trace)
                if traced is not None:
                    fields["trace_id"], fields["span_id"] = traced
            args: tuple[Any, ...] = (
                lease.name,
                lease.iid,
                lease.tenant,
                lease.queue,
                lease.attempt,
                lease.max_attempts,
                out.outcome,
                "before it began" if took is None else f"in {span(took)}",
            )
            if out.ok:
                fields["state"] = state
                if state is None:
                    record.msg = _HEAD + " (lease lost: result discarded)"
                else:
                    record.msg = _HEAD
                record.args = args
                handle(record)
                continue
            error = (out.error.strip().splitlines() or [""])[-1][:200]
            fields.update(error=error, state=state, retry_in_ms=retry_in_ms)
            if state is None and out.outcome == "cancelled":
                then = "the cancel had ended it already"
            elif state is None:
                then = "lease lost: not recorded"
            elif retry_in_ms is not None:
                then = f"retry in {span(retry_in_ms)}"
            elif state == "dead":
                then = "dead-lettered"
            else:
                then = state
            record.msg = _HEAD + ": %s; %s"
            record.args = (*args, error, then)
            handle(record)


_HEAD = "task %s %s (tenant %s, queue %s) attempt %d/%d %s %s"
_new_record = object.__new__


def took_ms(attempt: Attempt) -> int | None:
    """From the attempt's start to its end, ms (None: it never began)."""
    if attempt.began is None:
        return None
    ended = attempt.ended if attempt.ended is not None else time.monotonic()
    return max(0, round((ended - attempt.began) * 1000))
