"""The INFO line per reported attempt, as a hook (docs/operations.md, Logs)."""

from __future__ import annotations

import logging
import time
from typing import Any

from redcron.clock import span
from redcron.worker.execute import Attempt
from redcron.worker.hooks import AttemptHook, Reports

# the worker's logger: operators and tests filter on it, wherever the line is written
log = logging.getLogger("redcron.worker.worker")


class AttemptLog(AttemptHook):
    """A line per reported attempt: what ran, how it ended, where the task went.

    The fields also travel as the record's attributes (``extra``), so that
    ``--log-format json`` carries them as keys.
    """

    def after_report(self, reports: Reports) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        for attempt, out, state, retry_in_ms in reports:
            lease = attempt.lease
            took = took_ms(attempt)
            fields: dict[str, Any] = {
                "task_id": lease.iid,
                "task": lease.name,
                "tenant": lease.tenant,
                "queue": lease.queue,
                "attempt": lease.attempt,
                "max_attempts": lease.max_attempts,
                "outcome": out.outcome,
                "duration_ms": took,
            }
            head = "task %s %s (tenant %s, queue %s) attempt %d/%d %s %s"
            args: list[Any] = [
                lease.name,
                lease.iid,
                lease.tenant,
                lease.queue,
                lease.attempt,
                lease.max_attempts,
                fields["outcome"],
                "before it began" if took is None else f"in {span(took)}",
            ]
            if out.ok:
                fields["state"] = state
                if state is None:
                    head += " (lease lost: result discarded)"
                log.info(head, *args, extra=fields)
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
            log.info(head + ": %s; %s", *args, error, then, extra=fields)


def took_ms(attempt: Attempt) -> int | None:
    """From the attempt's start to its end, ms (None: it never began)."""
    if attempt.began is None:
        return None
    ended = attempt.ended if attempt.ended is not None else time.monotonic()
    return max(0, round((ended - attempt.began) * 1000))
