"""``/jobs``: every job with its schedule in words, next fire, last run,
pause state and breaker; ``/jobs/<id>``: one job's next fires, run history
with a duration chart, and pause / resume / trigger."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.ui import render
from redcron.dashboard.ui.charts import durations_svg
from redcron.dashboard.ui.render import Reply
from redcron.engine import JobStore
from redcron.errors import ValidationError
from redcron.keys import JOBIDX_SEP
from redcron.model import JobRecord, RunRecord, validation
from redcron.schedule.triggers import Trigger, make_trigger
from redcron.schedule.words import describe, upcoming
from redcron.store import Page, page_jobs

bp = flask.Blueprint("jobs", __name__)

#: fire times shown on a job's page
NEXT_FIRES = 5
#: runs in a job's duration chart
CHART_RUNS = 50


def trigger_of(job: JobRecord) -> Trigger | None:
    try:
        return make_trigger(cron=job.cron, every=job.every, at=job.at, tz=job.tz)
    except ValidationError:
        return None  # stored before a rule tightened: show the raw trigger


def schedule_words(job: JobRecord) -> str:
    """What makes the job run, in words: its trigger ("at 02:00 every day"), and
    for a chained job its upstreams ("after nightly-report (chained)": a job
    started by its upstreams has no trigger of its own to describe, and its
    manual-only trigger would read as if nothing ever ran it)."""
    trigger = trigger_of(job)
    words = describe(trigger) if trigger is not None else job.trigger
    if not job.depends_on:
        return words
    after = f"after {', '.join(job.depends_on)} (chained)"
    return f"{words}, {after}" if job.chained_by == "trigger" else after


def _job_cursor(text: str | None) -> tuple[str, str] | None:
    """A jobs page cursor, ``<tenant> <name>`` as the pager's links carry it."""
    if text is None:
        return None
    tenant, sep, name = text.partition(JOBIDX_SEP)
    if not sep:
        raise ValidationError("after", f"{text!r} is not a jobs page cursor")
    return tenant, name


@bp.get("/jobs")
def index() -> Reply:
    app = redcron_app()
    jobs = app.jobs
    args = flask.request.args
    tenant = args.get("tenant") or None
    if tenant is not None:
        validation.name("tenant", tenant)
    search = (args.get("q") or "").strip()
    if tenant is not None and not auth.may_see(tenant):
        found: Page[tuple[str, str, str]] = Page([], None)
    else:
        found = page_jobs(
            app.broker,
            tenant or auth.scope(),
            _job_cursor(render.after_cursor()),
            render.PER_PAGE,
            _job_cursor(render.before_cursor()),
            search or None,
        )
    # one page of names from the index; read only the page's jobs (one round trip)
    pager = render.keyed(found, jobs.get_many([jid for _t, _n, jid in found.items]))
    return render.page(
        "jobs.html",
        title="Jobs",
        jobs=pager,
        last=jobs.latest_runs([j.id for j in pager.rows]),
        words={j.id: schedule_words(j) for j in pager.rows},
        tenant=tenant or "",
        q=args.get("q", ""),
        scoped=auth.scope() is not None,
    )


@bp.get("/jobs/<job_id>")
def show(job_id: str) -> Reply:
    store = redcron_app().jobs
    job = auth.job(job_id)
    now = store.server_now()
    trigger = trigger_of(job)
    live = trigger is not None and not job.paused and not job.parked_reason
    fires = upcoming(trigger, now, NEXT_FIRES) if trigger is not None and live else []
    runs = store.runs(job.id, max(render.wanted(), CHART_RUNS))
    chart = durations_svg([_bar(r, job.tz) for r in reversed(runs[:CHART_RUNS])])
    return render.page(
        "job.html",
        title=f"Job {job.tenant}/{job.name}",
        job=job,
        words=schedule_words(job),
        fires=fires,
        zone=job.tz,
        runs=render.paginate(runs, exact=len(runs) < render.wanted()),
        chart=chart,
        spec=_pretty(job.spec),
    )


def _bar(run: RunRecord, zone: str) -> tuple[str, float | None, str]:
    """A run's bar: labelled with its time in the job's zone."""
    took = render.between(run.started_at or run.created_at, run.ended_at)
    return (render.in_zone(render.run_time(run), zone), took, run.state)


def _pretty(spec: str) -> str:
    try:
        data: Any = json.loads(spec)
    except ValueError:
        return spec
    return json.dumps(data, indent=2, sort_keys=True)


@bp.post("/jobs/<job_id>/pause")
def pause(job_id: str) -> Reply:
    return _switch(job_id, JobStore.pause, "paused {}: it fires no more until resumed")


@bp.post("/jobs/<job_id>/resume")
def resume(job_id: str) -> Reply:
    return _switch(job_id, JobStore.resume, "resumed {}")


def _switch(job_id: str, action: Callable[..., object], done: str) -> Reply:
    """Pause or resume the viewer's job, then back to its page saying so."""
    job = auth.job(job_id)
    action(redcron_app().jobs, job.name, tenant=job.tenant)
    flask.flash(done.format(f"{job.tenant}/{job.name}"))
    return render.go("ui.jobs.show", job_id=job.id)


@bp.post("/jobs/<job_id>/trigger")
def trigger(job_id: str) -> Reply:
    job = auth.job(job_id)
    run_id = redcron_app().jobs.trigger(job.name, tenant=job.tenant)
    flask.flash(f"started run {run_id}")
    return render.go("ui.runs.show", run_id=run_id)
