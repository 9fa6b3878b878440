"""``/v1/runs``: a run with its tasks, runs filtered and paged, cancel and retry.

Pages are newest first and keyed, not counted: the cursor names the last run
shown (its creation time and id), so runs fired while a client pages do not
shift or repeat entries.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import flask

from redcron.broker import RunCancel, TaskCancel
from redcron.dashboard.api import auth
from redcron.dashboard.api.common import ApiError, bad, body, only, query_int, redcron_app, reply
from redcron.errors import NotFound
from redcron.model import ExpiredTask, RunRecord, TaskRecord, validation
from redcron.model.records import epoch_ms
from redcron.model.serialize import to_json
from redcron.model.states import RunState

bp = flask.Blueprint("runs", __name__)

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
#: a job keeps at most keep_runs runs (default 100); read them all to filter and page
RUNS_PER_JOB = 100_000


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
    )


def run_json(run: RunRecord) -> dict[str, Any]:
    out: dict[str, Any] = to_json(run)
    out["tasks"] = [to_json(run_task(t)) for t in run.tasks or ()]
    return out


def _sort_key(run: RunRecord) -> tuple[int, str]:
    return (epoch_ms(run.created_at) if run.created_at else 0, run.id)


def _encode_cursor(key: tuple[int, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def _decode_cursor(text: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        ms, rid = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        bad("cursor", "not a cursor this API returned (pass next_cursor as it is)")
    if not isinstance(ms, int) or isinstance(ms, bool) or not isinstance(rid, str):
        bad("cursor", "not a cursor this API returned (pass next_cursor as it is)")
    return ms, rid


def page(
    runs: Sequence[RunRecord], limit: int, cursor: tuple[int, str] | None
) -> tuple[list[RunRecord], str | None]:
    """Newest first, after ``cursor``; the next cursor, or None on the last page."""
    ordered = sorted(runs, key=_sort_key, reverse=True)
    if cursor is not None:
        ordered = [r for r in ordered if _sort_key(r) < cursor]
    shown = ordered[:limit]
    more = len(ordered) > limit
    return shown, _encode_cursor(_sort_key(shown[-1])) if more else None


@bp.get("/runs")
def list_runs() -> flask.Response:
    args = flask.request.args
    limit = query_int("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    cursor = _decode_cursor(args["cursor"]) if args.get("cursor") else None
    state = args.get("state") or None
    if state is not None and state not in set(RunState):
        bad("state", f"{state!r} is not one of {', '.join(s.value for s in RunState)}")
    tenant = args.get("tenant") or None
    if tenant is not None:
        validation.name("tenant", tenant)
    jobs = redcron_app().jobs
    job_id = args.get("job") or None
    if job_id is not None:
        job_ids = [auth.job(job_id).id]
    elif tenant is not None and not auth.may_see(tenant):
        job_ids = []
    else:
        tenant = tenant or auth.scope()
        job_ids = [j.id for j in jobs.list_jobs(tenant)]
    found = [
        r
        for jid in job_ids
        for r in jobs.runs(jid, RUNS_PER_JOB)
        if (state is None or r.state == state) and (tenant is None or r.tenant == tenant)
    ]
    shown, next_cursor = page(found, limit, cursor)
    return reply({"runs": shown, "next_cursor": next_cursor})


@bp.get("/runs/<run_id>")
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


@bp.post("/runs/<run_id>/cancel")
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


@bp.post("/runs/<run_id>/tasks/<name>/cancel")
def cancel_task_route(run_id: str, name: str) -> flask.Response:
    only(body(required=False), set())
    run, done = cancel_task(run_id, name)
    out = run_json(run)
    out["may_still_be_running"] = done.may_still_be_running
    out["still_running"] = [name] if done.may_still_be_running else []
    return flask.jsonify(out)


@bp.post("/runs/<run_id>/tasks/<name>/retry")
def retry_task_route(run_id: str, name: str) -> flask.Response:
    only(body(required=False), set())
    return flask.jsonify(run_json(retry_task(run_id, name)))
