"""``redcron runs list|show|watch|cancel|retry``: the runs of jobs, and their DAGs."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import click

from redcron.broker.broker import shard_of_id
from redcron.broker.jobs import JobStore
from redcron.cli.common import (
    FiniteFloatRange,
    app_option,
    build_app,
    echo_json,
    fail,
    one_line,
    redis_option,
    table,
)
from redcron.errors import NotFound
from redcron.states import RUN_ACTIVE, TASK_LEASED, RunState

#: above this many tasks a progress line counts states instead of naming tasks
WATCH_NAMED_TASKS = 12
RECENT_RUNS = 20


# -- shared helpers (``redcron jobs`` uses them too) ---------------------------


def to_int(value: Any) -> int | None:
    """A hash field as an int; None when empty or not a number."""
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def iso_utc(value: Any) -> str | None:
    """A millisecond epoch as ISO-8601 UTC (``2026-11-29T02:00:00Z``; milliseconds
    only when there are any); None when empty."""
    ms = to_int(value)
    if ms is None:
        return None
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    spec = "seconds" if ms % 1000 == 0 else "milliseconds"
    return dt.isoformat(timespec=spec).replace("+00:00", "Z")


def dt_utc(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    return iso_utc(int(dt.timestamp() * 1000))


def seconds(value: float | None) -> str:
    """A duration for people: 0.25s, 12.3s, 4m05s, 2h03m."""
    if value is None:
        return ""
    if value < 10:
        return f"{value:.2f}s"
    if value < 60:
        return f"{value:.1f}s"
    if value < 3600:
        return f"{int(value // 60)}m{int(value % 60):02d}s"
    return f"{int(value // 3600)}h{int(value % 3600 // 60):02d}m"


def dag_tree(
    order: Sequence[str], deps: Mapping[str, Sequence[str]]
) -> list[tuple[str, str, bool]]:
    """The DAG as an indented tree: children (downstream tasks) under parents.

    Returns ``(line, task, repeated)`` rows in display order.  A task with
    several parents is drawn in full under the first one and as a
    ``repeated`` one-liner under the others, so the output grows with the
    edges, not the paths.  Iterative: a 1000-task chain is fine.
    """
    known = set(order)
    children: dict[str, list[str]] = {t: [] for t in order}
    for t in order:
        for d in deps.get(t, ()):
            if d in known:
                children[d].append(t)
    roots = [t for t in order if not any(d in known for d in deps.get(t, ()))]
    rows: list[tuple[str, str, bool]] = []
    shown: set[str] = set()
    # (task, prefix of its line, prefix of its children's lines)
    stack: list[tuple[str, str, str]] = [(r, "", "") for r in reversed(roots)]
    while stack:
        task, prefix, child_prefix = stack.pop()
        repeated = task in shown
        rows.append((prefix + task, task, repeated))
        if repeated:
            continue
        shown.add(task)
        kids = children[task]
        for i in range(len(kids) - 1, -1, -1):
            last = i == len(kids) - 1
            stack.append(
                (
                    kids[i],
                    child_prefix + ("└─ " if last else "├─ "),
                    child_prefix + ("   " if last else "│  "),
                )
            )
    for t in order:  # unreachable only if the DAG had a cycle (validation forbids it)
        if t not in shown:
            rows.append((t, t, False))
    return rows


def run_summary(run: Mapping[str, Any]) -> dict[str, Any]:
    """A run hash as the object ``runs list --json`` prints."""
    created, started, ended = (to_int(run.get(k)) for k in ("created", "started", "ended"))
    begin = started if started is not None else created
    duration = (ended - begin) / 1000 if ended is not None and begin is not None else None
    params: Any = run.get("params") or None
    if isinstance(params, str):
        with contextlib.suppress(ValueError):  # not JSON: shown as given
            params = json.loads(params)
    return {
        "id": run.get("id", ""),
        "job": run.get("job_name", ""),
        "job_id": run.get("job", ""),
        "tenant": run.get("tenant", ""),
        "state": run.get("state", ""),
        "trigger": run.get("trigger", ""),
        "scheduled_for": iso_utc(run.get("scheduled_for")),
        "created": iso_utc(created),
        "started": iso_utc(started),
        "ended": iso_utc(ended),
        "duration_s": duration,
        "total": to_int(run.get("total")) or 0,
        "done": to_int(run.get("n_done")) or 0,
        "succeeded": to_int(run.get("n_succeeded")) or 0,
        "failed": to_int(run.get("n_failed")) or 0,
        "cancelled": to_int(run.get("n_cancelled")) or 0,
        "reason": run.get("reason") or None,
        "params": params or None,
    }


def runs_table(runs: Sequence[Mapping[str, Any]], with_job: bool = False) -> str:
    """Runs as a table; ``with_job`` adds a job column (runs of several jobs)."""
    rows = [
        (
            *((s["job"],) if with_job else ()),
            s["id"],
            s["trigger"],
            s["scheduled_for"] or "",
            s["state"],
            f"{s['done']}/{s['total']}",
            seconds(s["duration_s"]),
        )
        for s in runs
    ]
    headers = ("run", "trigger", "scheduled for", "state", "done", "took")
    return table((("job",) if with_job else ()) + headers, rows)


def _task_row(inst: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
    attempts: list[dict[str, Any]] = list(inst.get("attempts") or [])
    state = inst.get("state", "")
    # time spent in attempts (queueing and backoff waits excluded); the current
    # attempt of a busy task counts up to now
    duration_ms: int | None = None
    for i, a in enumerate(attempts):
        begin = to_int(a.get("started")) or to_int(a.get("leased"))
        end = to_int(a.get("ended"))
        if end is None and i == len(attempts) - 1 and state in TASK_LEASED:
            end = now_ms
        if begin is not None and end is not None:
            duration_ms = (duration_ms or 0) + max(0, end - begin)
    first = attempts[0] if attempts else {}
    errors = [a.get("error", "") for a in attempts if a.get("error")]
    return {
        "task": inst.get("task", ""),
        "id": inst.get("id"),
        "state": state,
        "kind": inst.get("kind"),
        "name": inst.get("name"),
        "depends_on": [d for d in str(inst.get("deps", "")).split(",") if d],
        "attempts": to_int(inst.get("attempt")) or 0,
        "max_attempts": to_int(inst.get("max_attempts")),
        "started": iso_utc(to_int(first.get("started")) or to_int(first.get("leased"))),
        "ended": iso_utc(inst.get("ended")),
        "duration_s": None if duration_ms is None else duration_ms / 1000,
        "error": errors[-1] if errors else None,
    }


def run_details(store: JobStore, run_id: str) -> dict[str, Any]:
    """``runs show --json``: the run summary plus one row per task, in DAG order."""
    info = store.run(checked_run_id(run_id))
    now_ms = int(store.server_now().timestamp() * 1000)
    return {**run_summary(info), "tasks": [_task_row(i, now_ms) for i in info["instances"]]}


def render_run(details: Mapping[str, Any]) -> str:
    s = details
    out = [f"run {s['id']}  job {s['job']} (tenant {s['tenant']})"]
    fields = [
        ("state", s["state"] + (f" ({s['reason']})" if s.get("reason") else "")),
        ("trigger", s["trigger"]),
        ("scheduled for", s["scheduled_for"]),
        ("created", s["created"]),
        ("started", s["started"]),
        ("ended", s["ended"]),
        ("took", seconds(s["duration_s"])),
        (
            "progress",
            f"{s['done']}/{s['total']} done ({s['succeeded']} succeeded, "
            f"{s['failed']} failed, {s['cancelled']} cancelled)",
        ),
        ("params", json.dumps(s["params"]) if s.get("params") else None),
    ]
    out += [f"  {k:<14} {v}" for k, v in fields if v not in (None, "")]
    tasks = {t["task"]: t for t in s["tasks"]}
    if not tasks:
        return "\n".join(out)
    rows: list[tuple[str, ...]] = []
    for line, name, repeated in dag_tree(
        list(tasks), {t: v["depends_on"] for t, v in tasks.items()}
    ):
        t = tasks[name]
        if repeated:
            rows.append((f"{line} (see above)", "", "", "", ""))
            continue
        allowed = t["max_attempts"] or "?"
        rows.append(
            (
                line,
                t["state"],
                f"{t['attempts']}/{allowed}" if t["attempts"] else "",
                seconds(t["duration_s"]),
                one_line(t["error"] or "", 50),
            )
        )
    out += ["", table(("task", "state", "attempts", "took", "error"), rows)]
    return "\n".join(out)


def checked_run_id(run_id: str) -> str:
    try:
        shard_of_id(run_id)
    except NotFound:
        raise NotFound(f"no run {run_id!r}: run ids look like '<shard>-<ulid>@<fire>'") from None
    return run_id


def progress_line(details: Mapping[str, Any]) -> str:
    """One line of progress: run state, tasks done/total, and each task's state."""
    tasks = details["tasks"]
    head = f"{details['state']}  {details['done']}/{details['total']} done"
    if not tasks:
        return head
    if len(tasks) <= WATCH_NAMED_TASKS:
        return head + "  " + " ".join(f"{t['task']}={t['state']}" for t in tasks)
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t["state"]] = counts.get(t["state"], 0) + 1
    return head + "  " + ", ".join(f"{n} {st}" for st, n in sorted(counts.items()))


# -- commands ------------------------------------------------------------------


@click.group()
def runs() -> None:
    """List, show, watch, cancel and retry runs of jobs."""


@runs.command("list")
@click.option("--job", "job_name", default=None, help="Only runs of this job (by name).")
@click.option("--tenant", default="default", show_default=True, help="The job's tenant.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=RECENT_RUNS, show_default=True,
    help="Runs to show (newest first).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def list_cmd(
    job_name: str | None,
    tenant: str,
    limit: int,
    as_json: bool,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    """List runs, newest first: of one job (--job), or of every job of --tenant."""
    store = build_app(app_path, redis_url).jobs
    if job_name is not None:
        job_ids = [store.job_id(tenant, job_name)]
    else:
        job_ids = [j["id"] for j in store.list_jobs(tenant)]
    found = [run_summary(r) for jid in job_ids for r in store.runs(jid, limit)]
    found.sort(key=lambda s: (s["scheduled_for"] or "", s["created"] or ""), reverse=True)
    found = found[:limit]
    if as_json:
        echo_json(found)
    elif not found:
        click.echo("no runs yet" + (f" of job {job_name}" if job_name else f" in tenant {tenant}"))
    else:
        click.echo(runs_table(found, with_job=not job_name))


@runs.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@app_option
@redis_option
def show(run_id: str, as_json: bool, app_path: str | None, redis_url: str | None) -> None:
    """Show a run: its state and its DAG with each task's state, attempts and time."""
    details = run_details(build_app(app_path, redis_url).jobs, run_id)
    if as_json:
        echo_json(details)
    else:
        click.echo(render_run(details))


@runs.command()
@click.argument("run_id")
@click.option(
    "--interval", type=FiniteFloatRange(min=0.05), default=0.5, show_default=True,
    help="Seconds between polls.",
)  # fmt: skip
@click.option(
    "--timeout", type=FiniteFloatRange(min=0), default=0, show_default=True,
    help="Give up (exit 1) after this many seconds; 0 = wait until the run ends.",
)  # fmt: skip
@app_option
@redis_option
def watch(
    run_id: str, interval: float, timeout: float, app_path: str | None, redis_url: str | None
) -> None:
    """Follow a run until it ends: a line per change; exit 0 if it succeeded, else 1."""
    store = build_app(app_path, redis_url).jobs
    exit_code = watch_run(store, run_id, interval, timeout, click.echo, time.sleep)
    raise click.exceptions.Exit(exit_code)


def watch_run(
    store: JobStore,
    run_id: str,
    interval: float,
    timeout: float,
    echo: Callable[[str], Any],
    sleep: Callable[[float], Any],
) -> int:
    """Poll until the run ends; print a timestamped line whenever progress changes."""
    deadline = time.monotonic() + timeout if timeout else None
    last = ""
    header = False
    while True:
        details = run_details(store, run_id)
        if not header:
            echo(f"run {details['id']}  job {details['job']} (tenant {details['tenant']})")
            header = True
        line = progress_line(details)
        if line != last:
            stamp = datetime.now(UTC).strftime("%H:%M:%SZ")
            echo(f"{stamp}  {line}")
            last = line
        if details["state"] not in RUN_ACTIVE:
            return 0 if details["state"] == RunState.SUCCEEDED else 1
        if deadline is not None and time.monotonic() >= deadline:
            fail(f"run {run_id} still {details['state']} after {timeout:g}s")
        sleep(interval)


@runs.command()
@click.argument("run_id")
@app_option
@redis_option
def cancel(run_id: str, app_path: str | None, redis_url: str | None) -> None:
    """Cancel a run: waiting tasks at once, running ones at their next heartbeat."""
    store = build_app(app_path, redis_url).jobs
    before = store.run(checked_run_id(run_id))["state"]
    if before not in RUN_ACTIVE:
        click.echo(f"run {run_id}: already {before}, nothing to cancel")
        return
    state, running = store.cancel_run(run_id)
    if running:
        click.echo(
            f"run {run_id}: {state}; cancel requested for {running} running "
            f"task{'' if running == 1 else 's'} (they stop at their next heartbeat)"
        )
    else:
        click.echo(f"run {run_id}: {state}")


@runs.command()
@click.argument("run_id")
@click.option(
    "--task", "tasks", multiple=True, metavar="TASK",
    help="Retry this task (repeatable); default: every dead task of the run.",
)  # fmt: skip
@app_option
@redis_option
def retry(run_id: str, tasks: tuple[str, ...], app_path: str | None, redis_url: str | None) -> None:
    """Retry the failed part of a run: failed tasks ready again, their downstream reset."""
    store = build_app(app_path, redis_url).jobs
    n = store.retry_run(checked_run_id(run_id), list(tasks))
    if n == 0:
        click.echo(f"run {run_id}: nothing to retry (no dead tasks)")
        return
    state = store.run(run_id)["state"]
    click.echo(f"run {run_id}: retried {n} task{'' if n == 1 else 's'}; run is {state}")
