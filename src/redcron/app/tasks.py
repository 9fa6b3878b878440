"""A registered task and a handle on one instance of it.

:class:`TaskDef` is what ``@app.task`` returns (glossary: a *task* is the
registered function); :class:`TaskHandle` refers to one *instance* by id.
Both reach Redis through their :class:`~redcron.app.App`'s broker.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, ParamSpec, TypeVar

from redcron.engine import TaskCancel
from redcron.errors import TaskFailed, TaskTimeout, ValidationError
from redcron.model import TaskRecord, validation
from redcron.model.binding import CallShape
from redcron.model.dedupe import Dedupe
from redcron.model.dedupe import options as dedupe_options
from redcron.model.error_classes import ExcClasses
from redcron.model.rate import Rate
from redcron.model.states import TASK_TERMINAL, TaskState

if TYPE_CHECKING:
    from redcron.app import App

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class TaskOptions:
    """Defaults a task was declared with; per-call ``_options`` override them."""

    retries: int
    timeout: float | None
    priority: str
    tenant: str
    queue: str
    retry_base: float
    retry_cap: float
    cpu: float | None = None
    mem: int | None = None
    # -- unique windows and debounce (issue 21 §4): model/dedupe.py --
    unique_for: float | None = None
    debounce: float | None = None
    max_wait: float | None = None
    # -- end unique windows and debounce --
    # concurrency keys (model/concurrency.py): the argument whose value is the
    # key (None: only a per-call _concurrency_key=), and how many with one value
    # may hold a lease at once (None: no key)
    concurrency_key: str | None = None
    max_concurrent: int | None = None
    # which exceptions retry (model/error_classes.py): None = not declared
    retry_on: ExcClasses | None = None
    permanent_on: ExcClasses | None = None
    # rate limits (model/rate.py): the parsed rate (None: none) and the argument
    # whose value names each call's group (None: the task as a whole)
    rate: Rate | None = None
    rate_key: str | None = None

    @functools.cached_property
    def checked(self) -> CheckedOptions:
        """The defaults validated and in the units of an enqueue row, worked out
        once per task rather than once per call (raises ValidationError)."""
        return CheckedOptions(
            validation.name("tenant", self.tenant),
            validation.name("queue", self.queue),
            validation.priority(self.priority),
            validation.timeout_ms(self.timeout),
            validation.non_negative_int(self.retries, "retries") + 1,
            int(self.retry_base * 1000),
            int(self.retry_cap * 1000),
        )

    # -- unique windows and debounce (issue 21 §4) --
    @functools.cached_property
    def dedupe(self) -> Dedupe | None:
        """The declared unique window or debounce, checked (raises ValidationError)."""
        return dedupe_options(self.unique_for, self.debounce, self.max_wait)

    # -- end unique windows and debounce --


class CheckedOptions(NamedTuple):
    """A task's defaults as an enqueue row carries them (see ``TaskOptions.checked``)."""

    tenant: str
    queue: str
    priority: str
    timeout_ms: int
    max_attempts: int
    retry_base_ms: int
    retry_cap_ms: int


class TaskDef(Generic[P, R]):
    """A registered task: call it to run locally, ``.enqueue`` to run on a worker."""

    def __init__(self, app: App, fn: Callable[P, R], name: str, options: TaskOptions) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.options = options
        #: what a call may pass (read once: the worker binds every attempt to it)
        self.shape = CallShape.of(fn)
        self.wants_ctx = self.shape.wants_ctx

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<task {self.name}>"

    def check_args(self, args: Sequence[Any], kwargs: Mapping[str, Any], where: str = "") -> None:
        """Raise ValidationError when ``args``/``kwargs`` do not fit the function (the
        field ``args`` or ``kwargs.<name>``, under ``where``): such a call could
        only fail, on every attempt."""
        bad = self.shape.mismatch(args, kwargs)
        if bad is not None:
            raise ValidationError(f"{where}.{bad.field}" if where else bad.field, bad.message)

    def enqueue(self, *args: Any, **kwargs: Any) -> TaskHandle:
        """Enqueue one call; ``_countdown``, ``_tenant``, ``_priority``, ``_queue``,
        ``_timeout``, ``_retries``, ``_concurrency_key``, ``_unique_for``,
        ``_debounce``, ``_max_wait`` override the declared options for this call,
        ``_unique_key`` replaces the arguments as the unique (or debounce) key,
        ``_retry_on``/``_permanent_on`` replace the task's exception classes
        (together: a call giving one has none of the other's declared).

        With a unique window or a debounce the call may fold into an existing
        task: its handle comes back with ``duplicate`` True (docs/operations.md
        "Unique windows and debounce").

        Raises:
            ValidationError: the arguments do not fit the function (nothing is written).
        """
        opts = {k: kwargs.pop(k) for k in list(kwargs) if k.startswith("_")}
        row = self.app._row(self.name, "python", [list(args), kwargs], self.options, opts)
        self.check_args(args, kwargs)  # after the options: their errors come first
        folded = self.app._submit([row]).folded
        return TaskHandle.of_row(self.app, row.iid, folded)

    def map(self, items: Iterable[Any], **kwargs: Any) -> MapCall:
        """One call of this task per element of ``items`` (passed as its first
        parameter, ``kwargs`` beside it), for :meth:`App.chord`: Celery's
        ``group`` over a list.  Nothing is written here."""
        return MapCall(self, list(items), kwargs)

    def enqueue_many(self, calls: Iterable[Sequence[Any]], **options: Any) -> list[TaskHandle]:
        """Enqueue many calls (each a tuple of positional args) in one round trip."""
        rows = []
        for i, call in enumerate(calls):
            if not isinstance(call, list | tuple):
                raise ValidationError(
                    f"calls[{i}]",
                    f"{call!r} is not a tuple of positional arguments; "
                    "pass e.g. [(2, 3), (4, 5)] (use (x,) for one argument)",
                )
            rows.append(
                self.app._row(self.name, "python", [list(call), {}], self.options, dict(options))
            )
            self.check_args(call, {}, f"calls[{i}]")
        if not rows:
            return []
        folded = self.app._submit(rows).folded
        return [TaskHandle.of_row(self.app, row.iid, folded) for row in rows]


class MapCall(NamedTuple):
    """``task.map(items, **kwargs)``: one call of ``task`` per element of
    ``items``, the header of :meth:`App.chord` (nothing is written until then)."""

    task: TaskDef[Any, Any]
    items: list[Any]
    kwargs: dict[str, Any]

    def element_name(self) -> str:
        """The parameter each element is passed as: the function's first (after ``ctx``)."""
        return first_parameter(self.task, "header")


def first_parameter(task: TaskDef[Any, Any], role: str) -> str:
    """The name of ``task``'s first parameter after ``ctx``, which a chord fills
    (``role``: header or callback, for the error)."""
    sig = task.shape.signature
    params = list(sig.parameters.values()) if sig is not None else []
    plain = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not plain:
        raise ValidationError(
            role,
            f"task {task.name!r} takes no named parameter: a chord passes the {role} "
            + ("each element" if role == "header" else "list of the header's results")
            + " as its first parameter",
        )
    return plain[0].name


class TaskHandle:
    """A reference to one task instance by id."""

    def __init__(self, app: App, task_id: str, *, duplicate: bool = False) -> None:
        self.app = app
        self.id = task_id
        #: the enqueue folded into this existing task (a unique key's duplicate, or
        #: a debounce call): it created nothing
        self.duplicate = duplicate

    @classmethod
    def of_row(cls, app: App, iid: str, folded: Mapping[str, str]) -> TaskHandle:
        """The handle an enqueued row stands for: its own task, or the existing
        one it folded into (``Enqueued.folded``)."""
        existing = folded.get(iid)
        return cls(app, iid) if existing is None else cls(app, existing, duplicate=True)

    def __repr__(self) -> str:
        return f"<TaskHandle {self.id}>"

    def info(self) -> TaskRecord:
        """The task's record: state, attempts, error, result..."""
        return self.app.broker.task_info(self.id)

    @property
    def state(self) -> str:
        return str(self.info().state)

    @property
    def attempts(self) -> int:
        return self.info().attempt

    def cancel(self) -> TaskCancel:
        """End the task ``cancelled`` now, wherever it is; a running attempt's result
        will be refused.  ``may_still_be_running``: its code may go on until the
        worker kills it (a Python thread runs to its end)."""
        return self.app.broker.cancel(self.id)

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the task to end and return its result.

        Raises:
            TaskFailed: it ended in any other terminal state (dead in the DLQ,
                failed, cancelled, upstream_failed, skipped); carries the error.
            TaskTimeout: it did not end within ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            state = self.app.broker.watch(self.id)
            if state in TASK_TERMINAL:
                break
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise TaskTimeout(f"task {self.id} still {state} after {timeout}s")
            # A token arrives on done:<id> when it ends; re-check at least each second
            # in case the waiter registration expired with a restart.
            self.app.broker.wait_done(self.id, min(left, 1.0))
        info = self.info()
        if info.state != TaskState.SUCCEEDED:
            raise TaskFailed(self.id, info.state, info.error)
        return info.decoded_result()
