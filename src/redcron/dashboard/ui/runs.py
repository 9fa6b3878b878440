"""``/runs``: runs newest first, filtered by tenant, job, state and lateness,
a page at a time (``?after=<ms> <run id>``, the next link's cursor), listed as
``GET /v1/runs`` lists them (``api.runs.find_runs``: one page of the run
indexes, never every job's history).

``/runs/<id>``: a run's DAG drawn with its tasks' states, live; the
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
from redcron.errors import NotFound, ValidationError
from redcron.model import ExpiredTask, MapCounts, RunRecord, TaskRecord, validation
from redcron.model.retry_rule import attempts_short
from redcron.model.states import RUN_ACTIVE, TASK_TERMINAL, RunState, TaskState
from redcron.store import RUN_SCAN

bp = flask.Blueprint("runs", __name__)

#: log lines shown per attempt
LOG_LINES = 200
#: the Runs page's state filter, and its lateness filter (value -> what it keeps)
STATES = tuple(s.value for s in RunState)
LATENESS = {"true": True, "false": False}
#: states in which a task may be retried from the page
RETRYABLE = frozenset(
    {TaskState.FAILED, TaskState.DEAD, TaskState.CANCELLED, TaskState.UPSTREAM_FAILED}
)


def parse_after(text: str | None) -> api_runs.RunKey | None:
    """A Runs page cursor, ``<ms> <run id>`` as the next link carries it."""
    if not text:
        return None
    ms, _sep, run_id = text.partition(" ")
    if not (ms.isascii() and ms.isdigit()) or not run_id or " " in run_id:
        raise ValidationError("after", f"{text!r} is not a runs page cursor; follow the next link")
    return int(ms), run_id


def _choice(field: str, text: str | None, choices: tuple[str, ...]) -> str | None:
    if text and text not in choices:
        raise ValidationError(field, f"{text!r} is not one of {', '.join(choices)}")
    return text or None


def _job_id(tenant: str | None, name: str | None) -> str | None:
    """The id of the job ``name`` of ``tenant`` (the filter names jobs as people
    do; job names are per tenant, so the tenant must be known)."""
    if name is None:
        return None
    validation.name("job", name)
    if tenant is None:
        raise ValidationError("job", "name the tenant too: job names are per tenant")
    try:
        return redcron_app().jobs.job_id(name, tenant=tenant)
    except NotFound:
        raise ValidationError("job", f"tenant {tenant} has no job {name!r}") from None


@bp.get("/runs")
def index() -> Reply:
    args = flask.request.args
    tenant = args.get("tenant") or None
    if tenant is not None:
        validation.name("tenant", tenant)
    job = (args.get("job") or "").strip() or None
    state = _choice("state", args.get("state"), STATES)
    late = _choice("late", args.get("late"), tuple(LATENESS))
    after = parse_after(render.after_cursor())
    runs: list[RunRecord] = []
    nxt: api_runs.RunKey | None = None
    if tenant is None or auth.may_see(tenant):  # another tenant's: nothing, not even its jobs
        job_id = _job_id(tenant or auth.scope(), job)
        runs, nxt = api_runs.find_runs(
            tenant, job_id, state, LATENESS.get(late or ""), after, render.PER_PAGE
        )
    return render.page(
        "runs.html",
        title="Runs",
        runs=render.Keyed(runs, f"{nxt[0]} {nxt[1]}" if nxt else None, None),
        states=STATES,
        tenant=tenant or "",
        job=job or "",
        state=state or "",
        late=late or "",
        # a filter reads at most RUN_SCAN runs a page: a short page may have a next
        scanned=RUN_SCAN if (state or late) and nxt and len(runs) < render.PER_PAGE else None,
        scoped=auth.scope() is not None,
    )


def attempt_logs(task: TaskRecord) -> dict[int, list[str]]:
    broker = redcron_app().broker
    return {
        a.number: broker.inspection.log_lines(task.id, a.number, LOG_LINES) for a in task.attempts
    }


def map_badge(m: MapCounts) -> str:
    """A mapped task's node: its instances ended of all, and how many failed
    (``998/1,000 ✗1``: the node's hover text says it in words)."""
    if m.count is None:
        return "not made"
    return f"{m.ended:,}/{m.count:,}" + (f" ✗{m.failed:,}" if m.failed else "")


def nodes(run: RunRecord) -> list[DagNode]:
    out = []
    for task in run.tasks or ():
        if isinstance(task, ExpiredTask):
            out.append(DagNode(task.task, task.state, (), detail="expired with its retention"))
            continue
        name = task.task or task.name
        detail = (  # a mapped task runs as its instances (issue 32 §2)
            task.mapped.summary()
            if task.mapped
            else f"attempts {attempts_short(task) or 'none yet'}"
        )
        if task.error:
            detail += f": {render.error_line(task.error)[:120]}"
        carried = render.result_preview(task.result) if task.result is not None else None
        if carried is not None:
            detail += f"\nresult: {carried}"
        href = flask.url_for("ui.runs.show", run_id=run.id, task=name) + "#task"
        told = task.progress
        badge = map_badge(task.mapped) if task.mapped else None
        if told is not None:
            detail += f"\nprogress: {told.summary()}" + (f" {told.message}" if told.message else "")
            badge = badge or told.summary().split(" ")[0]  # 40/100
        out.append(
            DagNode(
                name,
                task.state,
                task.depends_on,
                href=href,
                detail=detail,
                carried=carried,
                badge=badge,
                fraction=told.fraction if told is not None else None,
            )
        )
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
