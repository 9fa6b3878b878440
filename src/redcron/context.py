"""What a running task sees: ``ctx.task_id``, ``ctx.attempt``, ``ctx.idem_key``,
``ctx.params``, ``ctx.upstream``, ``ctx.once``, ``ctx.progress``.

The methods that reach Redis (``once``, ``params``, ``upstream``) have
``a``-prefixed async forms for ``async def`` tasks (``await ctx.aonce(key)``,
``await ctx.aparams()``, ``await ctx.aupstream()``): they run the same call on a
thread (``asyncio.to_thread``), so a round trip never blocks the worker's event
loop, where other tasks' coroutines run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redcron.keys import map_index
from redcron.model import progress as _progress
from redcron.model.edges import RunInputs

if TYPE_CHECKING:
    from redcron.engine import Engine


@dataclass
class Context:
    """Passed as the first argument to tasks whose first parameter is named ``ctx``.

    ``task_id`` is the instance's id (as ``TaskHandle.id``; see the words in
    docs/architecture.md).  ``idem_key`` is stable across attempts (the task
    id for a one-off task, ``run_id:task_name`` in a run, ``task_name`` being
    the task's name in the job's DAG, not the registered name): use it to
    deduplicate effects.
    """

    task_id: str
    attempt: int
    idem_key: str
    tenant: str
    queue: str
    shard: int
    broker: Engine | None = field(default=None, repr=False)
    run_id: str | None = None
    _params: dict[str, Any] | None = field(default=None, repr=False)
    #: the run's params and upstream results, once read (by the worker when a
    #: parameter asked for them, else on first use of params or upstream)
    _inputs: RunInputs | None = field(default=None, repr=False)
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("redcron.task"))
    _cancelled: Callable[[], bool] | None = field(default=None, repr=False)
    #: where ``progress`` puts a checked value (the worker's attempt)
    _progress: Callable[[_progress.Value], None] | None = field(default=None, repr=False)

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Say how far the task is: ``done`` of ``total`` (None: unknown), and what
        it is doing.  Shown by ``task show``, ``GET /v1/tasks/{id}``, the task page
        and the run page's DAG.

        Cheap enough to call in a loop (no I/O here, the same from an ``async
        def`` task): the worker writes the latest value at once the first time,
        then at most once per heartbeat period (lease TTL/6), at once when
        ``done`` reaches ``total``, and always before the attempt's outcome is
        reported.  The instance keeps the latest value and the last 10 messages
        (each cut to 500 characters).  ``done`` must be a number >= 0 and
        ``total`` > 0: anything else raises ``ValidationError`` naming the field.
        Outside a worker (the function called directly) the value is checked
        and dropped.
        """
        value = _progress.check(done, total, message)
        if self._progress is not None:
            self._progress(value)

    @property
    def cancelled(self) -> bool:
        """Whether the worker has ended this attempt: cancelled, timed out, or
        handed back on shutdown.  A coroutine is cancelled for real (it gets
        ``CancelledError``); a thread cannot be, so a long plain task that checks
        this between steps stops instead of running on unseen."""
        return self._cancelled is not None and self._cancelled()

    @property
    def map_index(self) -> int | None:
        """This instance's index in the list its task is mapped over (issue 32
        §2: the ``3`` of ``transform[3]``); None for a task that is not mapped."""
        return map_index(self.task_id.rpartition("/")[2]) if self.run_id else None

    @property
    def params(self) -> dict[str, Any]:
        """The params a manual run was triggered with (``{}`` outside runs)."""
        if self._params is not None:
            return self._params
        if self.run_id is None or self.broker is None:
            return {}
        return self._read().params

    @property
    def upstream(self) -> Mapping[str, Any]:
        """Each upstream task's result, by its name in the job's DAG (``{}``
        outside runs and for a task that depends on none): what the edges into
        this task carry.  Read with the params, once per attempt, in one round
        trip, on first use (or before the call, when the function takes an
        upstream result or a param as an argument)."""
        if self.run_id is None or self.broker is None:
            return {}
        return self._read().upstream

    def _read(self) -> RunInputs:
        if self._inputs is None:
            assert self.broker is not None  # the properties return {} without one
            self._inputs = self.broker.run_inputs(self.shard, [self.task_id])[0]
        return self._inputs

    async def aparams(self) -> dict[str, Any]:
        """:attr:`params` from an ``async def`` task (its one read runs on a thread)."""
        if self._params is not None or self._inputs is not None or self.run_id is None:
            return self.params
        return await asyncio.to_thread(lambda: self.params)

    async def aupstream(self) -> Mapping[str, Any]:
        """:attr:`upstream` from an ``async def`` task (its one read runs on a thread)."""
        if self._inputs is not None or self.run_id is None or self.broker is None:
            return self.upstream
        return await asyncio.to_thread(lambda: self.upstream)

    def once(self, key: str, ttl: int = 7 * 86_400) -> bool:
        """Record an effect at most once: True for the first caller, False after.

        At-most-once, not exactly-once: if the process dies after ``once`` and
        before the effect, the effect never happens.  For exactly-once keep the
        effect and its record in one transaction in your own store.
        """
        if self.broker is None:
            raise RuntimeError("ctx.once needs a broker (the task is not running on a worker)")
        return self.broker.once(self.shard, self.tenant, f"{self.idem_key}:{key}", ttl)

    async def aonce(self, key: str, ttl: int = 7 * 86_400) -> bool:
        """:meth:`once` from an ``async def`` task: the same record, its round trip
        on a thread so the event loop goes on running other tasks."""
        return await asyncio.to_thread(self.once, key, ttl)
