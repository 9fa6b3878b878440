"""``/tasks``: search task instances by id, name, state and tenant (newest
first, from each shard's ``recent`` index); ``/tasks/<id>``: one task with
its attempts and their logs, and cancel."""

from __future__ import annotations

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.ui import render
from redcron.dashboard.ui.render import Reply
from redcron.dashboard.ui.runs import attempt_logs
from redcron.engine import TaskCancel, TaskFilter, scan_tasks
from redcron.errors import ValidationError
from redcron.model import TaskRecord, validation
from redcron.model.states import TASK_TERMINAL, TaskState

bp = flask.Blueprint("tasks", __name__)

STATES = tuple(s.value for s in TaskState)
#: newest instances a request looks at per shard, whatever the filter matches
#: (and however deep the page asked): past them the list says so
TASKS_SCAN = 5_000


@bp.get("/tasks")
def index() -> Reply:
    args = flask.request.args
    task_id = (args.get("id") or "").strip()
    if task_id:
        # an exact id: straight to the task (404 page if unknown or another tenant's)
        auth.task(task_id)
        return render.go("ui.tasks.show", task_id=task_id)
    tenant = args.get("tenant") or None
    if tenant is not None:
        validation.name("tenant", tenant)
    state = args.get("state") or None
    if state is not None and state not in STATES:
        known = ", ".join(STATES)
        raise ValidationError("state", f"{state!r} is not a task state; states: {known}")
    name = (args.get("name") or "").strip() or None
    cut = False
    if tenant is not None and not auth.may_see(tenant):
        found: list[TaskRecord] = []
    else:
        where = TaskFilter(state=state, tenant=tenant or auth.scope(), name=name)
        found, cut = scan_tasks(redcron_app().broker, where, render.wanted(), TASKS_SCAN)
    return render.page(
        "tasks.html",
        title="Tasks",
        tasks=render.paginate(found, exact=not cut and len(found) < render.wanted()),
        scanned=TASKS_SCAN if cut else None,
        states=STATES,
        tenant=tenant or "",
        state=state or "",
        name=name or "",
        scoped=auth.scope() is not None,
    )


@bp.get("/tasks/<path:task_id>")  # a run's task ids hold a slash: <run>/<task>
def show(task_id: str) -> Reply:
    task = auth.task(task_id)
    return render.page(
        "task.html",
        title=f"Task {task.name}",
        task=task,
        logs=attempt_logs(task),
        terminal=TASK_TERMINAL,
        concurrency=redcron_app().broker.inspection.concurrency(task),
    )


@bp.post("/tasks/<path:task_id>/cancel")
def cancel(task_id: str) -> Reply:
    task = auth.task(task_id)
    done = redcron_app().broker.cancel(task.id)
    flask.flash(f"task {task.id}: {_cancel_message(done)}")
    return render.go("ui.tasks.show", task_id=task.id)


def _cancel_message(done: TaskCancel) -> str:
    if not done.cancelled:
        return f"already {done.state}, nothing to cancel"
    if done.may_still_be_running:
        return "cancelled; its code may still run until the worker stops it (result refused)"
    return "cancelled"
