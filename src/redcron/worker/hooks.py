"""Attempt hooks: code that runs around every attempt a worker executes.

In the spirit of dramatiq's middleware: a hook is an object with any of three
methods, each a no-op by default, and a worker holds a list of them
(``Worker(app, hooks=[...])``, in ``worker.hooks``, fixed once it runs).

- ``before_attempt(attempt)``: on the slot's thread, just before the task body
  runs (after the slot claimed the attempt: one cancelled, timed out or handed
  back while it waited gets neither this call nor the next).  The body does
  not start until every hook returned.
- ``after_attempt(attempt, outcome)``: on the same thread, once the body
  returned (or its process or command ended), before its report.  A Python
  thread abandoned at its timeout calls it only when the body returns, maybe
  after the worker reported the attempt ``timed_out``.
- ``after_report(reports)``: once a batch of ended attempts was reported to
  Redis, on the worker's reporter thread (the lease loop hands it the batches
  it reported, so the hooks do not hold up the next lease), with where each
  task went (:class:`Reported`).  The attempts are held (``workers list``,
  the drain) until every hook returned.  An attempt handed back on shutdown is not reported,
  so it gets no call.

Hooks run in the order of the list.  They run on the worker's own threads, so
they must be quick and must not raise: an exception goes up into the thread
that called the hook, as one from the worker's own code would.

The worker's own hooks: :class:`~redcron.worker.attempt_log.AttemptLog` (the
INFO line per reported attempt, always there) and, with ``audit=True``,
:class:`~redcron.worker.audit.Audit` (the start and end of every execution).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from redcron.engine import FailResult
from redcron.worker.execute import Attempt, Outcome


class AttemptHook:
    """Base class of attempt hooks: override the methods you need."""

    def before_attempt(self, attempt: Attempt) -> None:
        """The task body of ``attempt`` is about to run."""

    def after_attempt(self, attempt: Attempt, outcome: Outcome) -> None:
        """The task body of ``attempt`` ran to ``outcome``; not reported yet."""

    def after_report(self, reports: Reports) -> None:
        """These ended attempts were reported to Redis."""


class Reported(NamedTuple):
    """One reported attempt, and what Redis did with its report."""

    attempt: Attempt
    outcome: Outcome
    #: where the task went: ``succeeded``, ``retry_wait``, ``ready`` (``scheduled``
    #: when its task's rate makes it wait for its turn), ``dead``,
    #: ``cancelled``...; None: the report was refused (the lease was lost)
    state: str | None
    #: when the task is retried (ms from now); None: it is not
    retry_in_ms: int | None


class Reports:
    """A batch of reported attempts (one shard's), iterated as :class:`Reported`.

    Made once per batch, without a :class:`Reported` per attempt until a hook
    iterates: the worker's own log hook looks at none when INFO is off.
    """

    __slots__ = ("_done", "_failed", "_group")

    def __init__(
        self, group: Sequence[tuple[Attempt, Outcome]], done: list[bool], failed: list[FailResult]
    ) -> None:
        self._group = group
        self._done = done  # one per successful outcome, in order: recorded or not
        self._failed = failed  # one per other outcome, in order

    @property
    def group(self) -> Sequence[tuple[Attempt, Outcome]]:
        """The reported attempts and their outcomes, in order."""
        return self._group

    def __len__(self) -> int:
        return len(self._group)

    def __iter__(self) -> Iterator[Reported]:
        oks = iter(self._done)
        fails = iter(self._failed)
        for attempt, out in self._group:
            if out.ok:
                yield Reported(attempt, out, "succeeded" if next(oks) else None, None)
            else:
                res = next(fails)
                yield Reported(attempt, out, res.state, res.retry_in_ms)


def _overrides(hook: AttemptHook, method: str) -> bool:
    return getattr(type(hook), method) is not getattr(AttemptHook, method)


class HookChain:
    """The hooks of a running worker, as the bound methods that do something,
    one tuple per hook point: a slot with no hook that acts before or after an
    attempt pays one empty check, not a call per hook."""

    __slots__ = ("after_attempt", "after_report", "before_attempt")

    def __init__(self, hooks: Iterable[AttemptHook] = ()) -> None:
        hooks = list(hooks)
        self.before_attempt = tuple(
            h.before_attempt for h in hooks if _overrides(h, "before_attempt")
        )
        self.after_attempt = tuple(h.after_attempt for h in hooks if _overrides(h, "after_attempt"))
        self.after_report = tuple(h.after_report for h in hooks if _overrides(h, "after_report"))
