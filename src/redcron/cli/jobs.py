"""``redcron jobs apply|list|show|pause|resume|trigger|delete``: scheduled jobs."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from redcron.app import App
from redcron.cli.audit import audited, record_cli
from redcron.cli.common import (
    app_option,
    build_app,
    echo_json,
    echo_listing,
    redis_option,
    table,
)
from redcron.cli.runs import dag_tree, iso_utc, runs_table
from redcron.engine import JobStore, refuse_unregistered, unserved_by_task, unserved_refs
from redcron.errors import ValidationError
from redcron.model import JobChange, JobRecord, RunRecord
from redcron.model.jobfile import load_job_files
from redcron.model.jobs import JobSpec, Task, spec_from_json
from redcron.model.serialize import to_json

RECENT_RUNS = 10

F = TypeVar("F", bound=Callable[..., Any])


def tenant_option(default: str | None = "default") -> Callable[[F], F]:
    return click.option(
        "--tenant",
        default=default,
        show_default=default is not None,
        help="The job's tenant." if default else "Only this tenant.",
    )


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(fn)


def task_text(task: Task) -> str:
    if task.kind == "container":
        return f"container {task.image}" + (f" {' '.join(task.command)}" if task.command else "")
    if task.kind == "command":
        return "command " + " ".join(task.command or [])
    return f"python {task.ref}"


def job_json(job: JobRecord, last_run: RunRecord | None, **extra: Any) -> dict[str, Any]:
    """A job as ``jobs list/show --json`` print it: the record, plus its last run."""
    return {**to_json(job), "last_run": to_json(last_run), **extra}


def last_run(store: JobStore, job: JobRecord) -> RunRecord | None:
    latest = store.runs(job.id, 1)
    return latest[0] if latest else None


def stored_spec(job: JobRecord) -> JobSpec:
    """The job's spec with its tasks in declaration order.

    The stored spec JSON has sorted keys; the compiled template keeps the
    order the tasks were declared in, which is the order people expect.
    """
    spec = spec_from_json(job.spec)
    ordered = {t: spec.tasks[t] for t in job.task_order if t in spec.tasks}
    ordered.update({t: task for t, task in spec.tasks.items() if t not in ordered})
    spec.tasks = ordered
    return spec


@click.group()
def jobs() -> None:
    """Declare, list, pause, trigger and delete scheduled jobs."""


@jobs.command()
@click.option(
    "-f", "--file", "files", multiple=True, type=click.Path(dir_okay=False),
    help="A YAML or JSON job file (repeatable).",
)  # fmt: skip
@click.option(
    "--prune", is_flag=True,
    help="With -A: also delete the jobs of the tenants the app declares jobs in that "
    "neither the app nor the -f files declare.",
)  # fmt: skip
@click.option(
    "--allow-unregistered", is_flag=True,
    help="Write a file job whose Python task no registered task is (neither the -A app nor "
    "a live worker registers it): for workers of another app not running yet.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@app_option
@redis_option
@audited("job.apply")
def apply(
    files: tuple[str, ...],
    prune: bool,
    allow_unregistered: bool,
    as_json: bool,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    """Create or update jobs from files (-f) and/or an app's declared jobs (-A:
    ``app.job`` and ``@app.cron``).

    Every job is validated before anything is written; an identical job is
    left alone (unchanged), so applying twice is safe.  Every Python task must
    be registered: a declared job's in the -A app; a file job's in the -A app
    or by a live worker (without -A and with no live worker, no task is
    known: give -A); else nothing is written and the error names the closest
    registered names (--allow-unregistered writes a file job anyway).  A task
    no live worker serves gets a warning: its runs wait until one starts.
    --prune deletes, in each tenant the app declares at least one job in, the
    jobs not declared by the app or the -f files of this same command; other
    tenants are never touched.
    """

    if not files and not app_path:
        raise click.UsageError("give job files with -f FILE, or an app with -A MODULE:APP")
    if prune and not app_path:
        raise click.UsageError("--prune deletes the jobs an app no longer declares: give -A")
    app = build_app(app_path, redis_url)
    # every job of every file validated first, its backoff against the settings too
    specs = load_job_files(files, app.settings.task_defaults())
    declared = list(app.declared_jobs.values()) if app_path else []
    if app_path and not declared and not files:
        click.echo(f"{app_path} declares no jobs (app.job, @app.cron); nothing to apply")
        return
    from_files = {(s.tenant, s.name) for s in specs}
    for spec in declared:
        if (spec.tenant, spec.name) in from_files:
            raise ValidationError(
                "name",
                f"job {spec.name!r} of tenant {spec.tenant!r} is in a job file and "
                f"declared in {app_path}; keep one",
            )
    app.check_task_names(declared)
    for spec in specs:  # a file's Python tasks that -A registers: their arguments must fit
        app.check_task_args(spec)
    # refused before anything is written (the declared jobs were checked above)
    if specs and not allow_unregistered:
        refuse_unregistered(app.broker, specs, app.tasks)
    # one line per task, however many jobs name it (a file may hold 10,000)
    for warning in unserved_by_task(unserved_refs(app.broker, [*specs, *declared])):
        click.echo(f"warning: {warning}", err=True)
    rows = (
        app.jobs.put_many(
            specs, progress=progress_printer(len(specs)), allow_unregistered=True
        )  # checked above, with the warnings' read of the registry
        if specs
        else []
    )
    if app_path:
        rows += app.apply_declared(prune=prune, keep=from_files)
    record_apply(app, rows)
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        click.echo(f"{row.change:<10} {row.tenant}/{row.name}")
    counts = {c: sum(1 for r in rows if r.change == c) for c in CHANGES}
    summary = ", ".join(f"{counts[c]} {c}" for c in CHANGES if c != "deleted" or prune)
    click.echo(f"{len(rows)} job{'' if len(rows) == 1 else 's'}: {summary}")


CHANGES = ("created", "updated", "unchanged", "deleted")


def record_apply(app: App, rows: Sequence[JobChange]) -> None:
    """One record per tenant whose jobs changed: the ids of the changed ones and
    the counts (an apply that changed nothing is recorded once, on the deployment)."""
    changed: dict[str, list[JobChange]] = {}
    for row in rows:
        if row.change != "unchanged":
            changed.setdefault(row.tenant, []).append(row)
    for tenant, done in changed.items():
        counts: Counter[str] = Counter(r.change for r in done)
        detail = " ".join(f"{c}={counts[c]}" for c in CHANGES if counts[c])
        record_cli(app.broker, "job.apply", tenant, [r.id for r in done], detail)
    if not changed:
        record_cli(app.broker, "job.apply", None, (), f"{len(rows)} unchanged")


#: an apply of at least this many jobs says on stderr how far it got, this often
PROGRESS_EVERY = 5_000


def progress_printer(total: int) -> Callable[[int, int], None] | None:
    """A ``put_many`` progress callback printing ``applied N/TOTAL jobs`` to stderr
    every :data:`PROGRESS_EVERY` jobs (None for a smaller apply): stdout keeps
    the per-job lines and ``--json`` alone."""
    if total < PROGRESS_EVERY:
        return None
    shown = 0

    def report(done: int, total: int) -> None:
        nonlocal shown
        if done - shown >= PROGRESS_EVERY or done == total:
            shown = done
            click.echo(f"applied {done}/{total} jobs", err=True)

    return report


@jobs.command("list")
@tenant_option(None)
@json_option
@app_option
@redis_option
def list_cmd(
    tenant: str | None, as_json: bool, app_path: str | None, redis_url: str | None
) -> None:
    """List jobs: trigger, time zone, next fire (UTC), paused, parked, last run state."""
    store = build_app(app_path, redis_url).jobs
    found = [(job, last_run(store, job)) for job in store.list_jobs(tenant)]
    rendered = [job_json(job, last) for job, last in found] if as_json else found
    empty = "no jobs" + (f" in tenant {tenant}" if tenant else "")
    echo_listing(rendered, as_json, empty, lambda: jobs_table(found))


def trigger_words(job: JobRecord) -> str:
    """The trigger column: a chained job says after which jobs it runs."""
    if not job.depends_on:
        return job.trigger
    after = "after " + ", ".join(job.depends_on)
    return after if job.chained_by == "upstreams" else f"{job.trigger}, {after}"


def jobs_table(found: Sequence[tuple[JobRecord, RunRecord | None]]) -> str:
    rows = [
        (
            job.name,
            job.tenant,
            trigger_words(job),
            job.tz,
            iso_utc(job.next_fire) or "-",
            "yes" if job.paused else "no",
            "yes" if job.parked_reason else "no",
            last.state if last else "-",
        )
        for job, last in found
    ]
    header = ("name", "tenant", "trigger", "tz", "next fire", "paused", "parked", "last run")
    out = table(header, rows)
    parked = [f"  {job.tenant}/{job.name}: {job.parked_reason}" for job, _ in found
              if job.parked_reason]  # fmt: skip
    if parked:
        out += "\n\nparked by the beat (not fired until updated or resumed):\n" + "\n".join(parked)
    return out


@jobs.command()
@click.argument("name")
@tenant_option()
@click.option(
    "--runs", "n_runs", type=click.IntRange(min=0), default=RECENT_RUNS, show_default=True,
    help="Recent runs to show.",
)  # fmt: skip
@json_option
@app_option
@redis_option
def show(
    name: str,
    tenant: str,
    n_runs: int,
    as_json: bool,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    """Show a job: its spec, its DAG as a tree, the next fire and recent runs."""
    store = build_app(app_path, redis_url).jobs
    job = store.get(name, tenant=tenant)
    spec = stored_spec(job)
    recent = store.runs(job.id, max(n_runs, 1))
    last = recent[0] if recent else None
    recent = recent[:n_runs]
    dag = [
        {"task": t, "kind": task.kind, "what": task_text(task), "depends_on": list(task.depends_on)}
        for t, task in spec.tasks.items()
    ]
    if as_json:
        echo_json(job_json(job, last, dag=dag, recent_runs=to_json(recent)))
        return
    click.echo(render_job(job, spec, recent))


def render_job(job: JobRecord, spec: JobSpec, recent: Sequence[RunRecord]) -> str:
    paused = "no"
    if job.paused:
        paused = "yes" + (f" ({job.paused_reason})" if job.paused_reason else "")
    fields: list[tuple[str, Any]] = [
        ("id", job.id),
        ("trigger", job.trigger),
        ("tz", spec.tz),
        ("next fire", iso_utc(job.next_fire) or "-"),
        ("last fire", iso_utc(job.last_fire)),
        ("paused", paused),
        ("depends on", job.chain_words()),
        ("parked", f"since {iso_utc(job.parked_at)}: {job.parked_reason}; not fired until "
         "updated (jobs apply) or resumed" if job.parked_reason else None),
        ("catchup", f"{spec.catchup} (limit {spec.catchup_limit})"),
        ("overlap", spec.overlap),
        ("jitter", f"{spec.jitter_s:g}s" if spec.jitter_s else None),
        ("deadline", f"{spec.deadline_s:g}s after each fire (a run not ended by then is late)"
         if spec.deadline_s is not None else None),
        ("pause after", f"{spec.pause_after_failures} failed runs" if spec.pause_after_failures
         else None),
        ("keep", f"{spec.keep_runs} runs, {spec.keep_days:g} days"),
        ("failures", job.consecutive_failures or None),
        ("version", job.version),
        ("updated", iso_utc(job.updated_at)),
    ]  # fmt: skip
    out = [f"job {job.name}  (tenant {job.tenant})"]
    out += [f"  {k:<12} {v}" for k, v in fields if v not in (None, "")]
    out += ["", "tasks:"]
    tree = dag_tree(list(spec.tasks), {t: task.depends_on for t, task in spec.tasks.items()})
    rows = [
        (f"  {line}" + (" (see above)" if rep else ""), "" if rep else task_text(spec.tasks[t]))
        for line, t, rep in tree
    ]
    out += table(("", ""), rows).split("\n")[1:]
    out += ["", "recent runs:" if recent else "no runs yet"]
    if recent:
        out += ["  " + line for line in runs_table(recent).split("\n")]
    return "\n".join(out)


@jobs.command()
@click.argument("name")
@tenant_option()
@app_option
@redis_option
@audited("job.pause")
def pause(name: str, tenant: str, app_path: str | None, redis_url: str | None) -> None:
    """Take a job off the schedule (manual triggers still work)."""
    app = build_app(app_path, redis_url)
    app.jobs.pause(name, tenant=tenant)
    record_cli(app.broker, "job.pause", tenant, [app.jobs.get(name, tenant=tenant).id])
    click.echo(f"paused {tenant}/{name}")


@jobs.command()
@click.argument("name")
@tenant_option()
@app_option
@redis_option
@audited("job.resume")
def resume(name: str, tenant: str, app_path: str | None, redis_url: str | None) -> None:
    """Put a paused job back on the schedule; fires missed while paused are not run."""
    app = build_app(app_path, redis_url)
    store = app.jobs
    store.resume(name, tenant=tenant)
    job = store.get(name, tenant=tenant)
    record_cli(app.broker, "job.resume", tenant, [job.id])
    nxt = iso_utc(job.next_fire)
    click.echo(f"resumed {tenant}/{name}" + (f"; next fire {nxt}" if nxt else "; no next fire"))


def parse_params(pairs: Sequence[str]) -> dict[str, Any]:
    """``k=v`` pairs; a value that parses as JSON (42, true, [1,2], '"42"') is taken
    as such, any other as text (``day=2026-11-29`` is the text ``"2026-11-29"``)."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--param")
        try:
            params[key] = json.loads(value)
        except ValueError:
            params[key] = value
    return params


@jobs.command()
@click.argument("name")
@tenant_option()
@click.option(
    "--param", "params", multiple=True, metavar="KEY=VALUE",
    help="A parameter of this run (repeatable): VALUE is taken as JSON when it parses "
    "(42, true, [1,2], '\"42\"'), else as text. ctx.params holds them; a task whose "
    "function declares KEY and whose args leave it unset gets it as a keyword argument.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the run id.")
@app_option
@redis_option
@audited("job.trigger")
def trigger(
    name: str,
    tenant: str,
    params: tuple[str, ...],
    as_json: bool,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    """Start a run of a job now (also when paused); prints the run id."""
    values = parse_params(params)
    app = build_app(app_path, redis_url)
    run_id = app.jobs.trigger(name, tenant=tenant, params=values)
    record_cli(app.broker, "job.trigger", tenant, [run_id])
    if as_json:
        echo_json({"run_id": run_id, "job": name, "tenant": tenant, "params": values})
    else:
        click.echo(run_id)


@jobs.command()
@click.argument("name")
@tenant_option()
@app_option
@redis_option
@audited("job.delete")
def delete(name: str, tenant: str, app_path: str | None, redis_url: str | None) -> None:
    """Delete a job; its runs stay in history until they expire, running ones finish."""
    app = build_app(app_path, redis_url)
    job_id = app.jobs.delete(name, tenant=tenant)
    record_cli(app.broker, "job.delete", tenant, [job_id])
    click.echo(f"deleted {tenant}/{name} ({job_id})")
