"""``/runs/<id>``: a run's DAG drawn with its tasks' states, live; the
selected task's attempts and their logs; cancel the run, cancel or retry a task.

The page reads one run (one pipelined round trip for its tasks) and the logs
of the selected task only, so a refresh costs the same whatever the DAG's size.
"""

from __future__ import annotations

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api import runs as api_runs
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.ui import render
from redcron.dashboard.ui.dag import DagNode, dag_svg
from redcron.dashboard.ui.render import Reply
from redcron.errors import NotFound
from redcron.model import ExpiredTask, RunRecord, TaskRecord
from redcron.model.retry_rule import attempts_short
from redcron.model.states import RUN_ACTIVE, TASK_TERMINAL, TaskState

bp = flask.Blueprint("runs", __name__)

#: log lines shown per attempt
LOG_LINES = 200
#: states in which a task may be retried from the page
RETRYABLE = frozenset(
    {TaskState.FAILED, TaskState.DEAD, TaskState.CANCELLED, TaskState.UPSTREAM_FAILED}
)


def attempt_logs(task: TaskRecord) -> dict[int, list[str]]:
    broker = redcron_app().broker
    return {
        a.number: broker.inspection.log_lines(task.id, a.number, LOG_LINES) for a in task.attempts
    }


def nodes(run: RunRecord) -> list[DagNode]:
    out = []
    for task in run.tasks or ():
        if isinstance(task, ExpiredTask):
            out.append(DagNode(task.task, task.state, (), detail="expired with its retention"))
            continue
        name = task.task or task.name
        detail = f"attempts {attempts_short(task) or 'none yet'}"
        if task.error:
            detail += f": {render.error_line(task.error)[:120]}"
        href = flask.url_for("ui.runs.show", run_id=run.id, task=name) + "#task"
        out.append(DagNode(name, task.state, task.depends_on, href=href, detail=detail))
    return out


@bp.get("/runs/<run_id>")
def show(run_id: str) -> Reply:
    run = auth.run(run_id)
    by_name = {
        (t.task if isinstance(t, ExpiredTask) else (t.task or t.name)): t for t in run.tasks or ()
    }
    chosen_name = flask.request.args.get("task")
    chosen = by_name.get(chosen_name) if chosen_name else None
    selected = chosen if isinstance(chosen, TaskRecord) else None
    return render.page(
        "run.html",
        title=f"Run {run.id} of {run.tenant}/{run.job_name}",
        run=run,
        zone=job_zone(run.job_id),
        dag=dag_svg(nodes(run)),
        active=run.state in RUN_ACTIVE,
        tasks=[t for t in run.tasks or () if isinstance(t, TaskRecord)],
        expired=[t for t in run.tasks or () if isinstance(t, ExpiredTask)],
        selected=selected,
        selected_name=chosen_name if chosen is not None else None,
        logs=attempt_logs(selected) if selected is not None else {},
        terminal=TASK_TERMINAL,
        retryable=RETRYABLE,
    )


def job_zone(job_id: str) -> str:
    """The zone of a run's job (its times are shown in it); UTC once the job is gone."""
    try:
        return redcron_app().jobs.get_by_id(job_id).tz
    except NotFound:
        return "UTC"


def _back(run_id: str, task: str | None = None) -> Reply:
    if task is None:
        return render.go("ui.runs.show", run_id=run_id)
    return render.go("ui.runs.show", anchor="task", run_id=run_id, task=task)


@bp.post("/runs/<run_id>/cancel")
def cancel(run_id: str) -> Reply:
    run, done = api_runs.cancel_run(run_id)
    still = f"; may still be running: {', '.join(done.running)}" if done.running else ""
    flask.flash(f"run is {run.state}{still}")
    return _back(run_id)


@bp.post("/runs/<run_id>/tasks/<name>/cancel")
def cancel_task(run_id: str, name: str) -> Reply:
    _run, done = api_runs.cancel_task(run_id, name)
    still = "; its code may still be running" if done.may_still_be_running else ""
    flask.flash(f"task {name} cancelled{still}")
    return _back(run_id, name)


@bp.post("/runs/<run_id>/tasks/<name>/retry")
def retry_task(run_id: str, name: str) -> Reply:
    api_runs.retry_task(run_id, name)
    flask.flash(f"task {name} will run again")
    return _back(run_id, name)
