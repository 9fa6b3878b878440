"""``/v1/jobs``: create, list, read, replace, delete, pause, resume, trigger.

Creating answers the job with ``warnings``: one line per Python task no live
worker serves (as ``redcron jobs apply -f`` warns).  A Python task that names
no registered task (neither the server's app, ``-A``, nor a live worker
registers it) is refused, 400 naming ``tasks.<task>.name`` and the closest
registered names, as ``redcron jobs apply`` and ``app.jobs.put`` refuse it;
``?allow_unregistered=true`` writes it anyway (redcron.engine.registered).

A body is a job in the job-file form (``tasks``: a DAG) or the short form
of the design's body, with one ``task`` (a registered ``name``, a ``command``
/ ``cmd``, or an ``image`` with its ``cmd``, and ``cpu``, ``mem``) and the
task's ``retries`` and ``timeout_s`` at the top level; a job-level
``depends_on`` chains jobs.  Both forms go through the job-file normalization
and validation (:mod:`redcron.model.jobfile`), so the API and ``redcron jobs
apply`` accept the same jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import (
    ApiError,
    bad,
    body,
    only,
    redcron_app,
    reply,
    unconfirmed,
)
from redcron.dashboard.api.operation import Operation, Routes, link, paged
from redcron.dashboard.api.params import LIMIT, NAME_PART, TENANT, ChoiceParam, CursorParam
from redcron.dashboard.api.record_schema import ref
from redcron.engine import JobStore, unserved_tasks
from redcron.errors import NotReplicated, ValidationError
from redcron.keys import JOBIDX_SEP
from redcron.model import JobRecord
from redcron.model.jobfile import JobFileError, parse_jobs
from redcron.model.jobs import JobSpec
from redcron.model.serialize import to_json
from redcron.store import page_jobs

bp = Routes("jobs", __name__)

#: the query of GET /v1/jobs
CURSOR = CursorParam("jobs", (NAME_PART, NAME_PART), "tenant:name")
#: the query of POST /v1/jobs and PUT /v1/jobs/<id>
ALLOW_UNREGISTERED = ChoiceParam(
    "allow_unregistered",
    ("true", "false"),
    "true: write a job whose Python task no registered task is (neither the server's app "
    "nor a live worker registers it), for workers of another app not running yet; "
    "else such a job is refused (400, tasks.<task>.name)",
)

SOURCE = "body"

_JOB = "$response.body#/id"
#: what a client can do next with the job a reply holds
JOB_LINKS = {
    "GetJob": link("get_job", {"job_id": _JOB}),
    "ReplaceJob": link("replace_job", {"job_id": _JOB}),
    "DeleteJob": link("delete_job", {"job_id": _JOB}),
    "PauseJob": link("pause_job", {"job_id": _JOB}),
    "ResumeJob": link("resume_job", {"job_id": _JOB}),
    "TriggerJob": link("trigger_job", {"job_id": _JOB}),
    "ListJobRuns": link("list_runs", {"job": _JOB}),
}
#: the body of POST /v1/jobs/<id>/trigger (optional)
TRIGGER_BODY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "params": {
            "type": "object",
            "additionalProperties": True,
            "description": "The run's params: ctx.params of its tasks, and a keyword "
            "argument of a Python task whose function declares the name and whose args "
            "in the job leave it unset",
        }
    },
}


def spec_from_body(data: dict[str, Any]) -> JobSpec:
    """One job of a request body, validated (nothing written)."""
    data = dict(data)
    if "jobs" in data:
        bad("jobs", "send one job per request (redcron jobs apply takes files of many)")
    if "paused" in data and not isinstance(data["paused"], bool):
        bad("paused", "must be true or false")
    try:
        (spec,) = parse_jobs(data, SOURCE)
    except JobFileError as exc:
        text = str(exc)
        message = text[len(exc.field) + 2 :] if text.startswith(f"{exc.field}: ") else text
        raise ApiError(400, "invalid", message, exc.job_field or None) from exc
    except (TypeError, ValueError, AttributeError) as exc:
        # a value of a shape no check expected; still the client's input
        if isinstance(exc, ValidationError):
            raise
        raise ApiError(400, "invalid", f"invalid job: {exc}") from exc
    return spec


def _put(spec: JobSpec) -> JobRecord:
    """Write the job; the record says what changed (created, updated, unchanged).
    A Python task must name a registered task (400 naming ``tasks.<task>.name``
    unless ``?allow_unregistered=true``), and one the server's app (``-A``)
    registers must be given arguments that fit its function (400 naming
    ``tasks.<task>.kwargs.<name>``)."""
    app = redcron_app()
    app.check_task_args(spec)
    return app.jobs.put(spec, allow_unregistered=ALLOW_UNREGISTERED.read() == "true")


@bp.post(
    "/jobs",
    doc=Operation(
        "create_job",
        "Create (201) or update (200) a job, keyed by tenant + name; warnings name the "
        "Python tasks no live worker serves",
        ref("JobCreated"),
        ok=("201", "200"),
        body=ref("JobBody"),
        query=(ALLOW_UNREGISTERED,),
        links=JOB_LINKS,
    ),
)
def create_job() -> flask.Response:
    data = body()
    auth.tenant_field(data)
    spec = spec_from_body(data)
    record = _put(spec)
    # as `redcron jobs apply -f` warns: a Python task no live worker serves
    # has its runs wait, ready, until one that registers it starts
    payload = to_json(record)
    payload["warnings"] = unserved_tasks(redcron_app().broker, [spec])
    return reply(payload, 201 if record.change == "created" else 200)


@bp.get(
    "/jobs",
    doc=Operation(
        "list_jobs",
        "Jobs by tenant and name, a page at a time (no cursor: the first page)",
        paged("jobs", ref("Job")),
        query=(TENANT, LIMIT, CURSOR),
        links={"GetJob": link("get_job", {"job_id": "$response.body#/jobs/0/id"})},
    ),
)
def list_jobs() -> flask.Response:
    """Jobs by tenant and name, a page at a time (``limit``, ``cursor``); a
    request without ``cursor`` answers the first page, with ``next_cursor``."""
    tenant = TENANT.read()
    limit = LIMIT.read()
    key = CURSOR.read()
    if tenant is not None and not auth.may_see(tenant):
        return reply({"jobs": [], "next_cursor": None})
    app = redcron_app()
    found = page_jobs(app.broker, tenant or auth.scope(), (key[0], key[1]) if key else None, limit)
    scope = tenant or auth.scope()
    # the index range holds only that tenant's jobs: a guard, never a filter
    jobs = [j for j in app.jobs.get_many([jid for _t, _n, jid in found.items])
            if scope is None or j.tenant == scope]  # fmt: skip
    after = found.next_cursor
    return reply(
        {
            "jobs": jobs,
            "next_cursor": CURSOR.encode(*after.split(JOBIDX_SEP, 1)) if after else None,
        }
    )


@bp.get("/jobs/<job_id>", doc=Operation("get_job", "A job", ref("Job"), errors=("404",)))
def get_job(job_id: str) -> flask.Response:
    return reply(auth.job(job_id))


@bp.put(
    "/jobs/<job_id>",
    doc=Operation(
        "replace_job",
        "Replace a job's spec (its name and tenant stay)",
        ref("Job"),
        errors=("404",),
        body=ref("JobReplaceBody"),
        query=(ALLOW_UNREGISTERED,),
    ),
)
def replace_job(job_id: str) -> flask.Response:
    current = auth.job(job_id)
    data = body()
    for key in ("name", "tenant"):
        given = data.setdefault(key, getattr(current, key))
        if given != getattr(current, key):
            bad(key, f"a job's {key} cannot change (it is {getattr(current, key)!r}); "
                "create a new job and delete this one")  # fmt: skip
    record = _put(spec_from_body(data))
    return reply(record)


@bp.delete("/jobs/<job_id>", doc=Operation("delete_job", "Delete a job", ok="204", errors=("404",)))
def delete_job(job_id: str) -> flask.Response:
    jobs = redcron_app().jobs
    job = auth.job(job_id)
    jobs.delete(job.name, tenant=job.tenant)
    return flask.Response(status=204)


@bp.post(
    "/jobs/<job_id>/pause",
    doc=Operation("pause_job", "Pause a job", ref("Job"), errors=("404",)),
)
def pause_job(job_id: str) -> flask.Response:
    return _switch(job_id, JobStore.pause)


@bp.post(
    "/jobs/<job_id>/resume",
    doc=Operation("resume_job", "Resume a job", ref("Job"), errors=("404",)),
)
def resume_job(job_id: str) -> flask.Response:
    return _switch(job_id, JobStore.resume)


def _switch(job_id: str, action: Callable[..., object]) -> flask.Response:
    """Pause or resume the caller's job; answers the job as it is now."""
    jobs = redcron_app().jobs
    job = auth.job(job_id)
    action(jobs, job.name, tenant=job.tenant)
    return reply(jobs.get_by_id(job_id))


@bp.post(
    "/jobs/<job_id>/trigger",
    doc=Operation(
        "trigger_job",
        "Start a manual run now (202: created, but durability=strict's replicas did not "
        "confirm it: look the run up, do not trigger again)",
        {"type": "object", "required": ["run_id"], "properties": {"run_id": {"type": "string"}}},
        ok="201",
        errors=("404", "429"),
        body=TRIGGER_BODY,
        body_required=False,
        links={
            "GetRun": link("get_run", {"run_id": "$response.body#/run_id"}),
            "CancelRun": link("cancel_run", {"run_id": "$response.body#/run_id"}),
        },
    ),
)
def trigger_job(job_id: str) -> flask.Response:
    job = auth.job(job_id)  # first: another tenant's job is a 404 whatever the body
    data = body(required=False)
    only(data, {"params"})
    params = data.get("params", {})
    if not isinstance(params, dict):
        bad("params", "must be an object")
    jobs = redcron_app().jobs
    try:
        run_id = jobs.trigger(job.name, tenant=job.tenant, params=params)
    except NotReplicated as exc:  # the run exists on the master: its id, 202
        return unconfirmed(exc, {"run_id": exc.run_id})
    return reply({"run_id": run_id}, 201)
