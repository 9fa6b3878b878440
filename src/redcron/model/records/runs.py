"""Run records: one run of a job (the ``run:<id>`` hash), with its tasks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from redcron.keys import job_of_run
from redcron.model.records.fields import (
    JSON_TEXT,
    Fields,
    _csv,
    _int,
    _opt_text,
    _state,
    _text,
    _time,
)
from redcron.model.records.tasks import ExpiredTask, TaskRecord
from redcron.model.states import RunState


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run of a job (the ``run:<id>`` hash).

    ``tasks`` is None from :meth:`JobStore.runs` (a history listing reads only
    the run hashes) and the run's tasks in DAG order from :meth:`JobStore.run`;
    ``task_names`` always lists them.  ``reason`` says why a fire made no run
    (state ``skipped`` or ``rejected``).  ``params`` is the JSON text the
    manual trigger passed (:meth:`decoded_params`).  ``deadline_at`` is when a
    run of a job with ``deadline_s`` is to end by, and ``late_at`` when the
    beat found it still going past that (None: not late; :attr:`late`).
    """

    id: str
    job_id: str
    job_name: str
    tenant: str
    #: the raw text when the hash holds no known state (edited by hand)
    state: RunState | str
    trigger: str
    reason: str | None
    scheduled_for: datetime | None
    created_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    total: int
    done: int
    succeeded: int
    failed: int
    cancelled: int
    cancel_requested: bool
    params: str | None = field(metadata=JSON_TEXT)
    task_names: tuple[str, ...]
    tasks: tuple[TaskRecord | ExpiredTask, ...] | None = None
    #: when the run is to have ended by (its nominal fire time + the job's
    #: ``deadline_s``); None: its job had no deadline when it was made
    deadline_at: datetime | None = None
    #: when the beat found it still going past its deadline (None: not late)
    late_at: datetime | None = None

    @classmethod
    def from_fields(
        cls,
        fields: Fields,
        tasks: tuple[TaskRecord | ExpiredTask, ...] | None = None,
        run_id: str | None = None,
    ) -> RunRecord:
        """Parse a decoded ``run:<id>`` hash; ``run_id`` is the id its key names.
        The hash leaves out what that id says (itself, its job: ``<job id>@...``)
        and params when there are none; one written before (with ``id`` and
        ``job``) reads the same."""
        rid = run_id or _text(fields.get("id"))
        return cls(
            id=rid,
            job_id=_text(fields.get("job")) or job_of_run(rid),
            job_name=_text(fields.get("job_name")),
            tenant=_text(fields.get("tenant")),
            state=_state(RunState, fields),
            trigger=_text(fields.get("trigger")),
            reason=_opt_text(fields, "reason"),
            scheduled_for=_time(fields, "scheduled_for"),
            created_at=_time(fields, "created"),
            started_at=_time(fields, "started"),
            ended_at=_time(fields, "ended"),
            total=_int(fields, "total"),
            done=_int(fields, "n_done"),
            succeeded=_int(fields, "n_succeeded"),
            failed=_int(fields, "n_failed"),
            cancelled=_int(fields, "n_cancelled"),
            cancel_requested=_text(fields.get("cancel_requested")) == "1",
            params=_opt_text(fields, "params"),
            task_names=_csv(fields, "tasks"),
            tasks=tasks,
            deadline_at=_time(fields, "deadline"),
            late_at=_time(fields, "late"),
        )

    def decoded_params(self) -> Any:
        """The run's parameters (a dict; None when none were given).  Text that
        is not JSON (written by hand) is returned as it is."""
        if not self.params:
            return None
        try:
            return json.loads(self.params)
        except ValueError:
            return self.params

    @property
    def late(self) -> bool:
        """Whether the run was still going past its deadline."""
        return self.late_at is not None

    @property
    def duration_s(self) -> float | None:
        """From the start (creation if it never started) to the end; None until it ends."""
        begin = self.started_at or self.created_at
        if begin is None or self.ended_at is None:
            return None
        return (self.ended_at - begin).total_seconds()
