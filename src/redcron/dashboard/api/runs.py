"""``/v1/runs``: a run with its tasks, runs filtered and paged, cancel and retry.

Pages are newest first and keyed, not counted: the cursor names the last run
shown (its creation time and id), so runs fired while a client pages do not
shift or repeat entries.  A page reads one page of the run indexes, not every
job's history; with a ``state`` filter it reads at most ``RUN_SCAN`` entries, so
a page may come back short with a ``next_cursor``: page until it is null.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import (
    ApiError,
    body,
    only,
    redcron_app,
    reply,
)
from redcron.dashboard.api.operation import Operation, Routes, link, paged
from redcron.dashboard.api.params import (
    EMPTY_BODY,
    LIMIT,
    MS,
    TENANT,
    ChoiceParam,
    CursorParam,
    TextParam,
)
from redcron.dashboard.api.record_schema import ref
from redcron.engine import RunCancel, TaskCancel
from redcron.errors import NotFound
from redcron.model import ExpiredTask, MapCounts, RunRecord, TaskRecord
from redcron.model.serialize import to_json
from redcron.model.states import RunState
from redcron.store import page_job_runs, page_runs

bp = Routes("runs", __name__)

#: the query of GET /v1/runs (and LIMIT, TENANT)
#: a run id: ``<job id>@<fire ms>`` or ``<job id>@m<ulid>`` (a manual run)
RUN_ID = "[A-Za-z0-9_.@-]{1,200}"
CURSOR = CursorParam("runs", (MS, RUN_ID), "created ms:run id")
JOB = TextParam("job", "Only this job's runs, by scheduled time (404 for an unknown job)")
STATE = ChoiceParam(
    "state",
    tuple(RunState),
    "Only runs in this state; a page then reads at most 1,000 runs, so it may hold "
    "fewer than limit while next_cursor is not null: page until it is",
)
LATE = ChoiceParam(
    "late",
    ("true", "false"),
    "Only runs found still going past their job's deadline_s (true), or only the "
    "others (false); as with state, a page then reads at most 1,000 runs",
)
#: what a client can do next with the run a reply holds
RUN_LINKS = {
    "GetRunTask": link("get_task", {"task_id": "$response.body#/tasks/0/id"}),
    "CancelRun": link("cancel_run", {"run_id": "$response.body#/id"}),
    "CancelRunTask": link(
        "cancel_run_task", {"run_id": "$response.body#/id", "name": "$response.body#/tasks/0/name"}
    ),
    "RetryRunTask": link(
        "retry_run_task", {"run_id": "$response.body#/id", "name": "$response.body#/tasks/0/name"}
    ),
}
#: a run page's cursor: (ms, run id) of its last run
RunKey = tuple[int, str]


@dataclass(frozen=True, slots=True)
class RunTask:
    """One task of a run as the API shows it (``GET /v1/runs/{id}``)."""

    name: str
    id: str | None
    state: str
    attempts: int
    started_at: datetime | None
    ended_at: datetime | None
    exit_code: int | None
    error: str | None
    #: a mapped task (issue 32 §2): its instances' counts; its instances are
    #: tasks of their own, ``GET /v1/tasks/{run id}/{name}[{i}]``
    mapped: MapCounts | None = None


def run_task(task: TaskRecord | ExpiredTask) -> RunTask:
    if isinstance(task, ExpiredTask):
        return RunTask(task.task, None, task.state, 0, None, None, None, None)
    first = task.attempts[0] if task.attempts else None
    return RunTask(
        name=task.task or task.name,
        id=task.id,
        state=task.state,
        attempts=task.attempt,
        started_at=first.started_at or first.leased_at if first else None,
        ended_at=task.ended_at,
        exit_code=task.exit_code,
        error=task.error,
        mapped=task.mapped,
    )


def run_json(run: RunRecord) -> dict[str, Any]:
    out: dict[str, Any] = to_json(run)
    out["tasks"] = [to_json(run_task(t)) for t in run.tasks or ()]
    return out


def find_runs(
    tenant: str | None,
    job_id: str | None,
    state: str | None,
    late: bool | None,
    cursor: RunKey | None,
    limit: int,
) -> tuple[list[RunRecord], RunKey | None]:
    """The runs the caller may see, newest first, ``limit`` past ``cursor``, and
    the next page's cursor: ``GET /v1/runs`` and the Runs page list them so.
    Of one job (its history by scheduled time; 404 for a job the caller may not
    see), or from the run indexes by creation time (``broker.listing``: a page
    reads a page, whatever the number of jobs and runs).  A tenant token lists
    its own tenant's index only: naming another tenant lists nothing."""
    broker = redcron_app().broker
    if job_id is not None:
        job = auth.job(job_id)
        if tenant is not None and tenant != job.tenant:
            return [], None
        # the job's history by scheduled time, a page at a time (however long its keep_runs)
        return page_job_runs(broker, job.id, cursor, limit, state, late)
    if tenant is not None and not auth.may_see(tenant):
        return [], None
    tenant = tenant or auth.scope()
    runs, after = page_runs(broker, tenant, cursor, limit, state, late)
    if tenant is not None:  # the tenant's own index: a guard, never a filter
        runs = [r for r in runs if r.tenant == tenant]
    return runs, after


@bp.get(
    "/runs",
    doc=Operation(
        "list_runs",
        "Runs, newest first, a page at a time",
        paged("runs", ref("Run")),
        errors=("404",),
        query=(JOB, STATE, LATE, TENANT, LIMIT, CURSOR),
        links={"GetRun": link("get_run", {"run_id": "$response.body#/runs/0/id"})},
    ),
)
def list_runs() -> flask.Response:
    """Runs newest first, a page at a time (:func:`find_runs`)."""
    limit = LIMIT.read()
    key = CURSOR.read()
    cursor = (int(key[0]), key[1]) if key is not None else None
    late = LATE.read()
    runs, after = find_runs(
        TENANT.read(), JOB.read(), STATE.read(), None if late is None else late == "true",
        cursor, limit,
    )  # fmt: skip
    return reply({"runs": runs, "next_cursor": CURSOR.encode(*after) if after else None})


@bp.get(
    "/runs/<run_id>",
    doc=Operation("get_run", "A run with its tasks", ref("Run"), errors=("404",), links=RUN_LINKS),
)
def get_run(run_id: str) -> flask.Response:
    return flask.jsonify(run_json(auth.run(run_id)))


def cancel_run(run_id: str) -> tuple[RunRecord, RunCancel]:
    """Cancel a run the caller may see: every live task ends cancelled, and the run;
    409 naming its state if it had already ended.  Shared with the dashboard."""
    jobs = redcron_app().jobs
    auth.run(run_id)
    done = jobs.cancel_run(run_id)
    if not done.cancelled:
        raise ApiError(409, "conflict", f"run {run_id} already ended {done.state}")
    return jobs.run(run_id), done


def _run_task(run_id: str, name: str) -> TaskRecord:
    run = auth.run(run_id)
    if name not in run.task_names:
        raise NotFound(f"run {run_id} has no task {name!r}; tasks: {', '.join(run.task_names)}")
    return redcron_app().broker.inspection.task_info(f"{run_id}/{name}")


def cancel_task(run_id: str, name: str) -> tuple[RunRecord, TaskCancel]:
    """Cancel one task of a run (a dead one leaves the DLQ); 409 naming its state
    if it had already ended."""
    task = _run_task(run_id, name)
    done = redcron_app().broker.cancel(task.id)
    if not done.cancelled:
        raise ApiError(409, "conflict", f"task {name} of run {run_id} already ended {done.state}")
    return redcron_app().jobs.run(run_id), done


def retry_task(run_id: str, name: str) -> RunRecord:
    """Run one task of a run again (and what waits on it); 409 if its upstream failed."""
    _run_task(run_id, name)
    jobs = redcron_app().jobs
    if jobs.retry_run(run_id, [name]) == 0:
        raise ApiError(
            409, "conflict", f"task {name} of run {run_id} cannot run: its upstream failed"
        )
    return jobs.run(run_id)


@bp.post(
    "/runs/<run_id>/cancel",
    doc=Operation(
        "cancel_run",
        "Cancel a run: every live task ends cancelled at once",
        ref("RunCancel"),
        errors=("404", "409"),
        body=EMPTY_BODY,
        body_required=False,
    ),
)
def cancel_run_route(run_id: str) -> flask.Response:
    """The run as ``GET`` shows it, with ``may_still_be_running`` (and, in
    ``still_running``, the tasks that were leased: they ended cancelled, but their
    workers may still be running the code until their next heartbeat)."""
    only(body(required=False), set())
    run, done = cancel_run(run_id)
    out = run_json(run)
    out["may_still_be_running"] = done.may_still_be_running
    out["still_running"] = list(done.running)
    return flask.jsonify(out)


@bp.post(
    "/runs/<run_id>/tasks/<name>/cancel",
    doc=Operation(
        "cancel_run_task",
        "Cancel one task of a run",
        ref("RunCancel"),
        errors=("404", "409"),
        body=EMPTY_BODY,
        body_required=False,
    ),
)
def cancel_task_route(run_id: str, name: str) -> flask.Response:
    only(body(required=False), set())
    run, done = cancel_task(run_id, name)
    out = run_json(run)
    out["may_still_be_running"] = done.may_still_be_running
    out["still_running"] = [name] if done.may_still_be_running else []
    return flask.jsonify(out)


@bp.post(
    "/runs/<run_id>/tasks/<name>/retry",
    doc=Operation(
        "retry_run_task",
        "Retry one ended task of a run",
        ref("Run"),
        errors=("404", "409"),
        body=EMPTY_BODY,
        body_required=False,
        links=RUN_LINKS,
    ),
)
def retry_task_route(run_id: str, name: str) -> flask.Response:
    only(body(required=False), set())
    return flask.jsonify(run_json(retry_task(run_id, name)))
