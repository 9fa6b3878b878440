"""Attempt hooks: which methods a chain calls, and what a report batch yields (issue 17)."""

from __future__ import annotations

from redcron.engine import FailResult, Lease
from redcron.worker import AttemptHook, Reported
from redcron.worker.capture import LineBuffer
from redcron.worker.execute import Attempt, Outcome
from redcron.worker.hooks import HookChain, Reports


class Before(AttemptHook):
    def before_attempt(self, attempt: Attempt) -> None:
        pass


class Both(AttemptHook):
    def before_attempt(self, attempt: Attempt) -> None:
        pass

    def after_attempt(self, attempt: Attempt, outcome: Outcome) -> None:
        pass


def test_a_chain_holds_only_the_methods_a_hook_overrides_in_list_order() -> None:
    b, both = Before(), Both()
    chain = HookChain([b, AttemptHook(), both])
    assert chain.before_attempt == (b.before_attempt, both.before_attempt)
    assert chain.after_attempt == (both.after_attempt,)
    assert chain.after_report == ()
    assert HookChain().before_attempt == ()


def _attempt(iid: str) -> Attempt:
    lease = Lease(iid, "1", 1, "t", "python", b"", 0, 0)
    return Attempt(lease, LineBuffer(10))


def test_reports_pair_each_attempt_with_where_its_task_went() -> None:
    ok, lost, retried, dead = (_attempt(i) for i in ("a", "b", "c", "d"))
    good = Outcome(ok=True)
    bad = Outcome(ok=False, outcome="failed", error="boom")
    reports = Reports(
        [(ok, good), (retried, bad), (lost, good), (dead, bad)],
        [True, False],
        [FailResult("retry_wait", 300), FailResult("dead")],
    )
    assert len(reports) == 4
    assert list(reports) == [
        Reported(ok, good, "succeeded", None),
        Reported(retried, bad, "retry_wait", 300),
        Reported(lost, good, None, None),
        Reported(dead, bad, "dead", None),
    ]
