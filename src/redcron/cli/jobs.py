"""``redcron jobs apply|list|show|pause|resume|trigger|delete``: scheduled jobs."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from redcron.broker.jobs import JobStore, spec_from_json
from redcron.cli.common import app_option, build_app, echo_json, redis_option, table
from redcron.cli.runs import (
    dag_tree,
    dt_utc,
    iso_utc,
    run_summary,
    runs_table,
    to_int,
)
from redcron.errors import ValidationError
from redcron.jobs import JobSpec, Task

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


def trigger_text(spec: JobSpec) -> str:
    if spec.cron:
        return f"cron {spec.cron}"
    if spec.every:
        return f"every {spec.every}"
    if spec.at is not None:
        return f"at {dt_utc(spec.at) if spec.at.tzinfo else spec.at.isoformat()}"
    return "manual"


def task_text(task: Task) -> str:
    if task.kind == "container":
        return f"container {task.image}" + (f" {' '.join(task.command)}" if task.command else "")
    if task.kind == "command":
        return "command " + " ".join(task.command or [])
    return f"python {task.ref}"


def job_summary(store: JobStore, info: Mapping[str, Any]) -> dict[str, Any]:
    """A job hash as the object ``jobs list --json`` prints."""
    spec = spec_from_json(info["spec"])
    last = store.runs(info["id"], 1)
    paused = info.get("paused") == "1"
    return {
        "id": info["id"],
        "name": info.get("name", spec.name),
        "tenant": info.get("tenant", spec.tenant),
        "trigger": trigger_text(spec),
        "cron": spec.cron,
        "every": spec.every,
        "at": dt_utc(spec.at) if spec.at and spec.at.tzinfo else None,
        "tz": spec.tz,
        "next_fire": None if paused else iso_utc(info.get("next_fire")),
        "paused": paused,
        "paused_reason": info.get("paused_reason") or None,
        "last_fire": iso_utc(info.get("last_fire")),
        "last_run_id": last[0].get("id") if last else None,
        "last_run_state": last[0].get("state") if last else None,
        "consecutive_failures": to_int(info.get("consecutive_failures")) or 0,
        "version": to_int(info.get("version")),
    }


def stored_spec(info: Mapping[str, Any]) -> JobSpec:
    """The job's spec with its tasks in declaration order.

    The stored spec JSON has sorted keys; the compiled template keeps the
    order the tasks were declared in, which is the order people expect.
    """
    spec = spec_from_json(info["spec"])
    try:
        order = [row["task"] for row in json.loads(info.get("template") or "[]")]
    except (ValueError, TypeError, KeyError):
        order = []
    ordered = {t: spec.tasks[t] for t in order if t in spec.tasks}
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
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@app_option
@redis_option
def apply(
    files: tuple[str, ...], as_json: bool, app_path: str | None, redis_url: str | None
) -> None:
    """Create or update jobs from files (-f) and/or an app's @app.cron jobs (-A).

    Every job is validated before anything is written; an identical job is
    left alone (unchanged), so applying twice is safe.
    """
    from redcron.jobfile import load_job_files

    if not files and not app_path:
        raise click.UsageError("give job files with -f FILE, or an app with -A MODULE:APP")
    specs = load_job_files(files)  # validates every job of every file first
    app = build_app(app_path, redis_url)
    declared = list(app.declared_jobs.values()) if app_path else []
    if app_path and not declared and not files:
        click.echo(f"{app_path} declares no @app.cron jobs; nothing to apply")
        return
    from_files = {(s.tenant, s.name) for s in specs}
    for spec in declared:
        spec.validate()
        if (spec.tenant, spec.name) in from_files:
            raise ValidationError(
                "name",
                f"job {spec.name!r} of tenant {spec.tenant!r} is in a job file and "
                f"declared with @app.cron in {app_path}; keep one",
            )
    store = app.jobs
    results = [(s, store.put(s)) for s in specs]
    if declared:
        results += list(zip(declared, app.apply_declared(), strict=True))
    rows = [
        {"tenant": s.tenant, "name": s.name, "id": r["id"], "version": r["version"],
         "change": r["change"]}
        for s, r in results
    ]  # fmt: skip
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        click.echo(f"{row['change']:<10} {row['tenant']}/{row['name']}")
    counts = {c: sum(1 for r in rows if r["change"] == c) for c in ("created", "updated")}
    unchanged = len(rows) - counts["created"] - counts["updated"]
    click.echo(
        f"{len(rows)} job{'' if len(rows) == 1 else 's'}: {counts['created']} created, "
        f"{counts['updated']} updated, {unchanged} unchanged"
    )


@jobs.command("list")
@tenant_option(None)
@json_option
@app_option
@redis_option
def list_cmd(
    tenant: str | None, as_json: bool, app_path: str | None, redis_url: str | None
) -> None:
    """List jobs: trigger, time zone, next fire (UTC), paused, last run state."""
    store = build_app(app_path, redis_url).jobs
    found = [job_summary(store, info) for info in store.list_jobs(tenant)]
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo("no jobs" + (f" in tenant {tenant}" if tenant else ""))
        return
    rows = [
        (
            j["name"],
            j["tenant"],
            j["trigger"],
            j["tz"],
            j["next_fire"] or "-",
            "yes" if j["paused"] else "no",
            j["last_run_state"] or "-",
        )
        for j in found
    ]
    click.echo(table(("name", "tenant", "trigger", "tz", "next fire", "paused", "last run"), rows))


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
    info = store.get(tenant, name)
    spec = stored_spec(info)
    summary = job_summary(store, info)
    recent = [run_summary(r) for r in store.runs(info["id"], n_runs)] if n_runs else []
    dag = [
        {"task": t, "kind": task.kind, "what": task_text(task), "depends_on": list(task.depends_on)}
        for t, task in spec.tasks.items()
    ]
    if as_json:
        echo_json({**summary, "spec": json.loads(info["spec"]), "dag": dag, "recent_runs": recent})
        return
    click.echo(render_job(summary, spec, info, recent))


def render_job(
    summary: Mapping[str, Any],
    spec: JobSpec,
    info: Mapping[str, Any],
    recent: Sequence[Mapping[str, Any]],
) -> str:
    s = summary
    paused = "no"
    if s["paused"]:
        paused = "yes" + (f" ({s['paused_reason']})" if s["paused_reason"] else "")
    fields: list[tuple[str, Any]] = [
        ("id", s["id"]),
        ("trigger", s["trigger"]),
        ("tz", spec.tz),
        ("next fire", s["next_fire"] or "-"),
        ("last fire", s["last_fire"]),
        ("paused", paused),
        ("catchup", f"{spec.catchup} (limit {spec.catchup_limit})"),
        ("overlap", spec.overlap),
        ("jitter", f"{spec.jitter_s:g}s" if spec.jitter_s else None),
        ("pause after", f"{spec.pause_after_failures} failed runs" if spec.pause_after_failures
         else None),
        ("keep", f"{spec.keep_runs} runs, {spec.keep_days:g} days"),
        ("failures", s["consecutive_failures"] or None),
        ("version", s["version"]),
        ("updated", iso_utc(info.get("updated"))),
    ]  # fmt: skip
    out = [f"job {s['name']}  (tenant {s['tenant']})"]
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
def pause(name: str, tenant: str, app_path: str | None, redis_url: str | None) -> None:
    """Take a job off the schedule (manual triggers still work)."""
    build_app(app_path, redis_url).jobs.pause(tenant, name)
    click.echo(f"paused {tenant}/{name}")


@jobs.command()
@click.argument("name")
@tenant_option()
@app_option
@redis_option
def resume(name: str, tenant: str, app_path: str | None, redis_url: str | None) -> None:
    """Put a paused job back on the schedule; fires missed while paused are not run."""
    store = build_app(app_path, redis_url).jobs
    store.resume(tenant, name)
    nxt = iso_utc(store.get(tenant, name).get("next_fire"))
    click.echo(f"resumed {tenant}/{name}" + (f"; next fire {nxt}" if nxt else "; no next fire"))


def parse_params(pairs: Sequence[str]) -> dict[str, Any]:
    """``k=v`` pairs; a value that parses as JSON (42, true, [1,2]) is taken as such."""
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
    help="A parameter of this run (repeatable); JSON values are parsed.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the run id.")
@app_option
@redis_option
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
    run_id = build_app(app_path, redis_url).jobs.trigger(tenant, name, values)
    if as_json:
        echo_json({"run_id": run_id, "job": name, "tenant": tenant, "params": values})
    else:
        click.echo(run_id)


@jobs.command()
@click.argument("name")
@tenant_option()
@app_option
@redis_option
def delete(name: str, tenant: str, app_path: str | None, redis_url: str | None) -> None:
    """Delete a job; its runs stay in history until they expire, running ones finish."""
    job_id = build_app(app_path, redis_url).jobs.delete(tenant, name)
    click.echo(f"deleted {tenant}/{name} ({job_id})")
