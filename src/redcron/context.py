"""What a running task sees: ``ctx.task_id``, ``ctx.attempt``, ``ctx.idem_key``, ``ctx.once``."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("redcron.task"))

    @property
    def params(self) -> dict[str, Any]:
        """The params a manual run was triggered with (``{}`` outside runs)."""
        if self.run_id is None or self.broker is None:
            return {}
        if self._params is None:
            self._params = self.broker.run_params(self.shard, self.run_id)
        return self._params

    def once(self, key: str, ttl: int = 7 * 86_400) -> bool:
        """Record an effect at most once: True for the first caller, False after.

        At-most-once, not exactly-once: if the process dies after ``once`` and
        before the effect, the effect never happens.  For exactly-once keep the
        effect and its record in one transaction in your own store.
        """
        if self.broker is None:
            raise RuntimeError("ctx.once needs a broker (the task is not running on a worker)")
        return self.broker.once(self.shard, self.tenant, f"{self.idem_key}:{key}", ttl)
