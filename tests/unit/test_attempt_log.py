"""The INFO line per reported attempt (``worker/attempt_log.py``), without Redis:
one record per attempt, each with its own message and fields, made as copies
of one record per batch."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from redcron.engine import FailResult, Lease
from redcron.worker.attempt_log import AttemptLog
from redcron.worker.capture import LineBuffer
from redcron.worker.execute import Attempt, Outcome
from redcron.worker.hooks import Reports


def attempt(iid: str, began: float | None = 10.0) -> Attempt:
    lease = Lease(iid, "3", 1, "echo", "python", b"", 0, 0, "acme", 0.0, 0, "q1", 2)
    a = Attempt(lease, LineBuffer(10))
    a.began, a.ended = began, 10.25
    return a


class Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept() -> Iterator[list[logging.LogRecord]]:
    log = logging.getLogger("redcron.worker.worker")
    handler, level = Keep(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    yield handler.records
    log.removeHandler(handler)
    log.setLevel(level)


def test_one_record_per_attempt_with_its_own_message_and_fields(
    kept: list[logging.LogRecord],
) -> None:
    group = [
        (attempt("0-A"), Outcome(ok=True)),
        (attempt("0-B", began=None), Outcome(ok=False, outcome="cancelled", error="cancelled")),
        (attempt("0-C"), Outcome(ok=False, outcome="failed", error="Traceback\nValueError: boom")),
    ]
    failed = [FailResult("cancelled"), FailResult("retry_wait", 1500)]
    AttemptLog().after_report(Reports(group, [True], failed))
    assert [r.getMessage() for r in kept] == [
        "task echo 0-A (tenant acme, queue q1) attempt 1/2 succeeded in 250ms",
        "task echo 0-B (tenant acme, queue q1) attempt 1/2 cancelled before it began: "
        "cancelled; cancelled",
        "task echo 0-C (tenant acme, queue q1) attempt 1/2 failed in 250ms: "
        "ValueError: boom; retry in 1.5s",
    ]
    a, b, c = kept
    assert (a.task_id, a.state, a.duration_ms, a.levelno) == ("0-A", "succeeded", 250, 20)  # type: ignore[attr-defined]
    assert not hasattr(a, "error")  # a success has no error field
    assert (b.task_id, b.duration_ms, b.state) == ("0-B", None, "cancelled")  # type: ignore[attr-defined]
    assert (c.error, c.retry_in_ms, c.tenant, c.queue) == ("ValueError: boom", 1500, "acme", "q1")  # type: ignore[attr-defined]
    assert len({id(r) for r in kept}) == 3 and a.created == c.created


def test_nothing_is_made_below_info(kept: list[logging.LogRecord]) -> None:
    logging.getLogger("redcron.worker.worker").setLevel(logging.WARNING)
    AttemptLog().after_report(Reports([(attempt("0-A"), Outcome(ok=True))], [True], []))
    assert kept == []
